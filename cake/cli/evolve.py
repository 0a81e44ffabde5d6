"""`cake evolve`: evolve schedules for a workload's op; `--resume RUN_DIR` continues a killed run.

    cake evolve --op flash_kmeans                      # offline agent, clean start, CPU or GPU
    cake evolve --op flash_kmeans --agent openai --base-url http://127.0.0.1:8000/v1 --model qwen
    cake evolve --resume runs/20261130-101500-flash_kmeans-s0
    cake evolve --op flash_kmeans --executor ray                 # Ray started here, --workers CPUs
    cake evolve --op flash_kmeans --executor ray --ray-address 10.0.0.1:6379   # join a cluster

Without a GPU every candidate is verified under Triton's CPU interpreter and its fitness is the cost
model's predicted speedup (stored as fitness_kind=model, and said so in the output).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from cake.cli.common import ExitCode, UsageError

# Defaults sized so that `cake evolve --op flash_kmeans` on a 2-core machine without a GPU finishes in a few
# minutes: 1 seed evaluation, then TURNS turns of PROPOSALS proposals ranked by the cost model, EVALS_PER_TURN
# of them verified under the interpreter.
CPU_DEFAULTS = {"turns": 5, "proposals": 16, "evals_per_turn": 3}
GPU_DEFAULTS = {"turns": 40, "proposals": 24, "evals_per_turn": 4}
RUNS_DIR = Path("runs")
EXECUTORS = ("local", "ray")
DEFAULT_EVAL_TIMEOUT_S = 1800.0  # the Ray task guard; the evaluator's own timeouts fire well before
INTERRUPTED = 130  # the shell's convention for a run stopped by Ctrl-C
# CPUs left to each GPU slot's evaluation (its bench and verifier workers) when compiling ahead: the timing counts
# the host path, which the compiles must not crowd out.
CPUS_PER_EVALUATION = 2


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("evolve", help="evolve schedules for a workload (offline agent or an LLM)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", default="flash_kmeans", help="workload (or one of its ops), default flash_kmeans")
    p.add_argument("--kernel", help="which op of the workload to evolve (default: the one its fitness is on)")
    p.add_argument("--agent", choices=("offline", "openai"), default="offline")
    p.add_argument("--arch", default=None, help="target arch for checks and the cost model (default: the seeds')")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when a GPU is visible")
    p.add_argument("--backend", choices=("triton", "cuda"), default=None,
                   help="lowering backend (default: cuda on a GPU with nvcc, which reaches warp-specialized "
                        "TMA/wgmma schedules; triton otherwise)")
    p.add_argument("--budget", type=int, default=None, help="stop after this many evaluations")
    p.add_argument("--turns", type=int, default=None, help="turns after the seed turn")
    p.add_argument("--proposals", type=int, default=None, help="proposals per turn (all ranked by the cost model)")
    p.add_argument("--evals-per-turn", type=int, default=None, help="how many ranked proposals are evaluated")
    p.add_argument("--wall-time", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--plateau", type=int, default=None, help="stop after this many turns without a better best")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--against", nargs="+", default=None, metavar="BASELINE",
                   help="GPU: measure fitness over these of the workload's fitness baselines only (default: all of "
                        "them; a run refuses to start while one cannot run on this host); stored in the run's config")
    p.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<time>-<op>-s<seed>)")
    p.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR", help="continue this run")
    p.add_argument("--workers", type=int, default=None,
                   help="CPU evaluation workers (default: up to 2, one per core); on a GPU host, one per GPU")
    p.add_argument("--verdict-cache", type=Path, default=None, help="verdict cache directory (default: the verifier's)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="where evaluations run: local (a pool on this host) or ray (pip install -e '.[ray]')")
    p.add_argument("--ray-address", default=None,
                   help="join this Ray cluster (ray start --head ...); default: start Ray here")
    p.add_argument("--eval-timeout", type=float, default=DEFAULT_EVAL_TIMEOUT_S,
                   help="Ray only: cancel an evaluation still running after this many seconds (+ a grace period)")
    p.add_argument("--explore-slots", type=int, default=1, metavar="N",
                   help="GPU: of each turn's evaluations, N go to the best-ranked candidates of operators the run has "
                        "not timed yet (at least one stays the cost model's best)")
    p.add_argument("--anchor-on-parents", action=argparse.BooleanOptionalAction, default=True,
                   help="GPU: rank a child of a timed parent at the parent's measured time x the model's predicted "
                        "change, instead of the model's absolute prediction")
    p.add_argument("--operator-feedback", action=argparse.BooleanOptionalAction, default=True,
                   help="offline agent: weight the operators it draws by the run's resource refusals and by the "
                        "model term its measured parents were underestimated on")
    p.add_argument("--family-samples", type=int, default=None, metavar="N",
                   help="offline agent: draw a structural move that redraws its params (warp_specialize, ...) N "
                        "times and propose the draw the cost model prices fastest (default 16; 1: one draw)")
    p.add_argument("--disable-operator", action="append", default=[], metavar="NAME",
                   help="offline agent: never draw or sweep this operator (repeatable; an ablation, or a move whose "
                        "children fail on this device)")
    p.add_argument("--reuse-bench-process", action=argparse.BooleanOptionalAction, default=True,
                   help="GPU: evaluate on one bench server per device instead of a fresh bench process each "
                        "(a re-timing of a new best always takes a fresh one)")
    p.add_argument("--compile-workers", type=int, default=None, metavar="N",
                   help="local executor, CUDA backend: compile a turn's candidates ahead of their evaluations, N nvcc "
                        f"runs at a time (0: off; default: the CPUs less {CPUS_PER_EVALUATION} per GPU slot)")
    ablation = p.add_argument_group("ablations (stored in the run's config)")
    ablation.add_argument("--static-checks", action=argparse.BooleanOptionalAction, default=True,
                          help="--no-static-checks: evaluate candidates the checker rejects")
    ablation.add_argument("--cost-model", action=argparse.BooleanOptionalAction, default=True,
                          help="--no-cost-model: evaluate a seeded random m of the legal proposals")
    ablation.add_argument("--learned-rules", action=argparse.BooleanOptionalAction, default=True,
                          help="--no-learned-rules: no learned rules loaded, none distilled")
    llm = p.add_argument_group("openai agent")
    llm.add_argument("--base-url", default=None, help="an OpenAI-compatible server (vLLM, SGLang, Ollama ...)")
    llm.add_argument("--model", default="gpt-4o-mini")
    llm.add_argument("--api-key-env", default="OPENAI_API_KEY", help="the environment variable holding the key")
    llm.add_argument("--token-budget", type=int, default=None)
    llm.add_argument("--repair-rounds", type=int, default=2)
    llm.add_argument("--llm-cache", type=Path, action="append", default=[],
                     help="replay answers from another run's llm_cache.sqlite (repeatable)")
    llm.add_argument("--replay-only", action="store_true", help="never call the server; cached answers only")
    p.set_defaults(run=run)


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit; a caller's usage error says where instead
        raise UsageError(message)


def parse_evolve_args(argv: list[str], *, where: str) -> argparse.Namespace:
    """`cake evolve`'s arguments parsed from `argv` (an experiment's run); a bad flag is a UsageError naming
    `where`."""
    parser = _RaisingParser(prog="cake")
    register(parser.add_subparsers(dest="command"))
    try:
        return parser.parse_args(["evolve", *argv])
    except UsageError as error:
        raise UsageError(f"{where}: {error}") from None


def _device(requested: str | None) -> str:
    if requested == "cpu":
        return requested
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is visible here (drop --device to run on the CPU)")
    return "cuda" if torch.cuda.is_available() else "cpu"


def compile_workers_for(requested: int | None, eval_config: dict[str, Any], slots: int) -> int:
    """`--compile-workers`, checked; by default the CPUs less CPUS_PER_EVALUATION per device slot on a GPU run of
    the CUDA backend (the one that compiles per call), else 0."""
    if requested is not None:
        if requested < 0:
            raise UsageError(f"--compile-workers must be >= 0 (0: no compiles ahead), got {requested}")
        return requested
    if eval_config["device"] != "cuda" or eval_config["backend"] != "cuda":
        return 0
    return max(0, (os.cpu_count() or 1) - CPUS_PER_EVALUATION * slots)


def default_backend(device: str) -> str:
    """The CUDA backend on a GPU with nvcc: it expresses the warp-specialized TMA/wgmma schedules the
    Triton backend refuses (E0601-E0605), which is where the H200 wins are. Triton otherwise: its
    interpreter is what verifies on a CPU."""
    from cake.lowering.cuda.compile import find_nvcc

    return "cuda" if device == "cuda" and find_nvcc() is not None else "triton"


def new_config(args: argparse.Namespace) -> dict[str, Any]:
    from cake.experiments.workload import UnknownWorkloadError, get_workload

    try:
        workload = get_workload(args.op)
    except UnknownWorkloadError as error:
        raise UsageError(str(error)) from None
    kernel = args.kernel or (args.op if args.op != workload.name else workload.primary.contract)
    try:
        spec = workload.op(kernel)
    except KeyError as error:
        raise UsageError(str(error.args[0])) from None
    seeds = [str(p) for p in spec.seed_paths()]
    missing = [s for s in seeds if not Path(s).is_file()]
    if missing:
        raise UsageError(f"seed schedules missing: {', '.join(missing)}")
    device = _device(args.device)
    try:
        against = workload.fitness_for(kernel).over(args.against).against
    except ValueError as error:
        raise UsageError(f"--against: {error}") from None
    backend = args.backend or default_backend(device)
    if backend == "cuda" and device != "cuda":
        raise UsageError("--backend cuda needs --device cuda (a GPU)")
    if args.disable_operator:
        from cake.agents.offline import BASE_WEIGHTS

        unknown = sorted(set(args.disable_operator) - set(BASE_WEIGHTS))
        if args.agent != "offline" or unknown:
            raise UsageError(f"--disable-operator: {'unknown operator(s) ' + ', '.join(unknown) if unknown else 'the offline agent only'}"
                             f" (operators: {', '.join(sorted(BASE_WEIGHTS))})")
    if args.family_samples is not None and args.family_samples < 1:
        raise UsageError(f"--family-samples must be >= 1 (1: one draw of a family move), got {args.family_samples}")
    if args.explore_slots < 0:
        raise UsageError(f"--explore-slots must be >= 0 (0: the cost model's order only), got {args.explore_slots}")
    defaults = GPU_DEFAULTS if device == "cuda" else CPU_DEFAULTS
    turns = args.turns if args.turns is not None else defaults["turns"]
    evals = args.evals_per_turn if args.evals_per_turn is not None else defaults["evals_per_turn"]
    loop = {
        "turns": turns + 1,  # + the seed turn
        "proposals_per_turn": args.proposals if args.proposals is not None else defaults["proposals"],
        "evals_per_turn": evals, "seed": args.seed, "parents_per_turn": 4,
        "budget_evals": args.budget, "budget_tokens": args.token_budget if args.agent == "openai" else None,
        "budget_wall_s": args.wall_time, "plateau_turns": args.plateau,
        "static_checks": args.static_checks, "cost_model": args.cost_model,
        "explore_slots": args.explore_slots if device == "cuda" else 0,
        "anchor_on_parents": args.anchor_on_parents and device == "cuda",  # model fitness: nothing is measured
    }
    from cake.ir.parser import parse

    arch = args.arch or parse(Path(seeds[0]).read_text(), Path(seeds[0]).name).target
    config: dict[str, Any] = {
        "workload": workload.name, "op": kernel, "agent": args.agent, "arch": arch, "seeds": seeds, "loop": loop,
        "eval": {"device": device, "backend": backend, "seed": args.seed,
                 "verdict_cache": str(args.verdict_cache) if args.verdict_cache else None,
                 "cpu_workers": args.workers or min(2, os.cpu_count() or 1), "against": list(against),
                 "reuse_bench_process": args.reuse_bench_process},
        "llm": None, "learned_rules": args.learned_rules,
    }
    if args.agent == "offline":
        from cake.agents.offline import FAMILY_SAMPLES

        config["offline"] = {"disabled": sorted(set(args.disable_operator)), "feedback": args.operator_feedback,
                             "family_samples": args.family_samples or FAMILY_SAMPLES}
    if args.agent == "openai":
        from cake.agents.llm import LLMSettings

        config["llm"] = LLMSettings(model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                                    token_budget=args.token_budget, repair_rounds=args.repair_rounds).to_json()
        config["llm_replay"] = {"from": [str(p) for p in args.llm_cache], "replay_only": args.replay_only}
    if device == "cuda":
        config.update(timing_provenance(backend))
    return config


def timing_provenance(backend: str) -> dict[str, str]:
    """What timed a GPU run's candidates, as `scripts/fit_cost_model.py` keys a calibration: the device, the
    backend's toolchain and codegen version, and the clock (the bench times eager calls between CUDA events).
    Evolve runs used to record none of it, so their timings could be fitted only under a stated assumption."""
    import torch

    from cake.ir.cost_calibrations import BENCH_CLOCK, toolchain_key
    from cake.lowering.backend import get_backend

    lowering = get_backend(backend)
    return {"device": torch.cuda.get_device_name(0), "toolchain": toolchain_key(lowering.toolchain()),
            "codegen": str(lowering.codegen_version), "clock": BENCH_CLOCK}


def require_fitness_baselines(config: dict[str, Any]) -> None:
    """A measured run's fitness is undefined while one of its baselines cannot run (never a speedup over the
    ones that did), so every candidate would fail after its gates and timing: refuse to start instead, naming
    each missing baseline with why and how to go on. Checked on the host that starts the run (the local
    executor's; a Ray cluster's workers must have the same packages)."""
    from cake.experiments.workload import get_workload

    if config["eval"]["device"] != "cuda":  # the CPU's fitness is the cost model's, over no baseline
        return
    workload = get_workload(config["workload"])
    op = config["op"]
    against = workload.fitness_for(op).over(config["eval"].get("against")).against
    if not against:
        raise UsageError(f"{op} declares no baselines, so a GPU run has nothing to measure its fitness over: evolve "
                         f"it on the CPU (--device cpu, the cost model's fitness) or evolve {workload.fitness.op}")
    missing = workload.unavailable_fitness_baselines(op, against)
    if missing:
        ready = [b for b in against if b not in dict(missing)]
        hint = (f"install them, or measure over the others only: --against {' '.join(ready)} (stored in the run's "
                f"config)" if ready else "install at least one of them")
        reasons = "; ".join(f"{name}: {why}" for name, why in missing)
        raise UsageError(f"{workload.name}'s fitness baselines cannot all run here ({reasons}); {hint}")


def run(args: argparse.Namespace) -> int:
    from cake.runs.store import NotARunError, RunExistsError, RunStore

    if args.executor == "ray":  # before any run directory is written
        from cake.evaluation.ray_executor import RayUnavailableError, require_ray

        try:
            require_ray()
        except RayUnavailableError as error:
            raise UsageError(str(error)) from None
    if args.resume is not None:
        try:
            store = RunStore.open(args.resume)
        except NotARunError as error:
            raise UsageError(str(error)) from None
        try:
            require_fitness_baselines(store.config)
        except UsageError:
            store.close()
            raise
        resumed = True
    else:
        config = new_config(args)
        require_fitness_baselines(config)  # before the run directory is written
        out = args.out or RUNS_DIR / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.op}-s{args.seed}"
        try:
            store = RunStore.create(out, config)
        except RunExistsError as error:
            raise UsageError(str(error)) from None
        resumed = False
    with store:
        return _evolve(store, resumed, args)


def _evolve(store: Any, resumed: bool, args: argparse.Namespace) -> int:
    from rich.console import Console

    from cake.agents.llm import MissingKeyError
    from cake.agents.session import open_session
    from cake.cli.evolve_progress import RichProgress
    from cake.evaluation.executors import executor_runtime, make_executor
    from cake.evaluation.ray_executor import RayUnavailableError

    console = Console(highlight=False, soft_wrap=True)
    config = store.config
    try:
        session = open_session(store)
    except MissingKeyError as error:
        raise UsageError(str(error)) from None
    toolchain, settings = session.toolchain, session.settings
    verb = "resuming" if resumed else "run"
    console.print(f"[bold]cake evolve[/bold] {verb} [cyan]{store.root}[/cyan]: {config['workload']}/{config['op']} "
                  f"on {config['arch']}, agent {config['agent']}, backend {config['eval']['backend']}, seed {settings.seed}")
    console.print(toolchain.describe())
    store.log("resume" if resumed else "start", f"pid {os.getpid()}")
    progress = RichProgress(console, settings, toolchain.fitness_kind.value)
    devices = toolchain.devices()  # one slot per GPU, or N CPU workers
    try:
        with executor_runtime(args.executor, devices=devices, ray_address=args.ray_address):
            compile_workers = compile_workers_for(args.compile_workers, config["eval"], len(devices))
            executor = make_executor(args.executor, toolchain.evaluator, devices, timeout_s=args.eval_timeout,
                                     compile_workers=compile_workers)
            ahead = f", compiling ahead on {compile_workers} CPUs" if compile_workers and args.executor == "local" else ""
            console.print(f"executor: {args.executor}, slots {dict(executor.capacity())}{ahead}")
            try:
                with progress:
                    result = session.loop(executor, progress).run()
            finally:
                executor.close()
    except RayUnavailableError as error:
        raise UsageError(str(error)) from None
    except KeyboardInterrupt:
        # Every finished evaluation is already committed; the one in flight is redone on resume.
        console.print(f"interrupted; continue with: cake evolve --resume {store.root}")
        return INTERRUPTED
    if result.skipped_evaluations:
        console.print(f"resume: {result.skipped_evaluations} finished evaluations kept, none repeated")
    console.print(f"stopped: {result.stop.value}")
    best = result.best
    if best is None or best.evaluation is None:
        console.print("no candidate passed verification")
    else:
        kind = best.evaluation.fitness_kind.value if best.evaluation.fitness_kind else "?"
        note = " (cost-model prediction, not a timing)" if kind == "model" else ""
        retime = result.best_retime
        if retime is not None and retime.fitness is not None:
            console.print(f"best: #{best.id} {best.mutation} — speedup {retime.fitness:.3f}x re-timed in a fresh "
                          f"process (selected at {best.fitness:.3f}x), fitness_kind={kind}")
        else:
            console.print(f"best: #{best.id} {best.mutation} — speedup {best.fitness:.3f}x, fitness_kind={kind}{note}")
    console.print(f"run directory: {store.root}")
    console.print(f"report: cake report {store.root}")
    return ExitCode.OK
