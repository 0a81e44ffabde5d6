"""`cake experiment`: a grid of evolve runs from a TOML spec, and its report across seeds.

    cake experiment experiments/specs/static_checks.toml                # runs in experiments-out/<name>
    cake experiment SPEC.toml --executor ray --ray-address HOST:6379    # every evaluation on the cluster
    cake experiment SPEC.toml --out DIR                                 # again: finished runs are skipped,
                                                                        # a killed one is resumed
    cake experiment report DIR                                          # CSV, PNG and markdown in DIR/report

Each run is `cake evolve` with the spec's flags, the arm's and its seed (see cake.harness.spec).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cake.cli.common import ExitCode, UsageError

OUT_DIR = Path("experiments-out")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("experiment", help="run a grid of evolve runs from a spec, or report on one",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="+", metavar="SPEC.toml | report DIR [DIR ...]",
                   help="a spec to run; `report DIR` to aggregate an experiment directory; `report RUN_DIR RUN_DIR "
                        "...` to aggregate separate `cake evolve` runs (e.g. seeds run on different days) into --out")
    p.add_argument("--out", type=Path, default=None, help="experiment directory (default experiments-out/<name>)")
    p.add_argument("--executor", choices=("local", "ray"), default="local")
    p.add_argument("--ray-address", default=None, help="join this Ray cluster (default: start Ray here)")
    p.add_argument("--workers", type=int, default=None,
                   help="CPU evaluation slots (and the CPUs of a Ray started here); default up to 2")
    p.add_argument("--eval-timeout", type=float, default=None, help="Ray only: the task guard, seconds")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    target = args.target
    if target[0] == "report" and len(target) == 2 and not _is_run(Path(target[1])):
        return _report(Path(target[1]), args.out)
    if target[0] == "report" and len(target) >= 2:
        return _report_runs([Path(t) for t in target[1:]], args.out)
    if len(target) != 1:
        raise UsageError("give one spec file, or `report DIR`")
    return _run(Path(target[0]), args)


def _report(out: Path, dest: Path | None) -> int:
    from cake.harness.report import write_report
    from cake.harness.runner import SPEC_NAME
    from cake.harness.spec import SpecError

    if not (out / SPEC_NAME).is_file():
        raise UsageError(f"{out} is not an experiment directory (no {SPEC_NAME})")
    try:
        written = write_report(out, dest)
    except SpecError as error:
        raise UsageError(str(error)) from None
    for path in written:
        print(path)
    return ExitCode.OK


def _is_run(path: Path) -> bool:
    from cake.runs.store import DB_NAME

    return (path / DB_NAME).is_file()


def _report_runs(roots: list[Path], dest: Path | None) -> int:
    from cake.harness.report import write_runs_report

    not_runs = [str(r) for r in roots if not _is_run(r)]
    if not_runs:
        raise UsageError(f"not `cake evolve` run directories (no run database): {', '.join(not_runs)}")
    if dest is None:
        raise UsageError("aggregating separate run directories needs --out DIR for the report")
    for path in write_runs_report(roots, dest):
        print(path)
    return ExitCode.OK


def _run(spec_path: Path, args: argparse.Namespace) -> int:
    import os

    from rich.console import Console

    from cake.agents.llm import MissingKeyError
    from cake.cli.evolve import DEFAULT_EVAL_TIMEOUT_S, parse_evolve_args
    from cake.cli.experiment_progress import ExperimentView
    from cake.evaluation.executors import executor_runtime, make_executor
    from cake.evaluation.ray_executor import RayUnavailableError
    from cake.harness.runner import ExperimentMismatchError, run_experiment
    from cake.harness.spec import RunSpec, SpecError, load_spec

    try:
        spec = load_spec(spec_path)
    except SpecError as error:
        raise UsageError(str(error)) from None
    out = args.out or OUT_DIR / spec.name
    workers = args.workers or min(2, os.cpu_count() or 1)

    def config_for(run: RunSpec) -> dict[str, Any]:
        from cake.cli.evolve import new_config

        argv = run.argv()
        if not any(a == "--workers" for a in argv):
            argv += ["--workers", str(workers)]
        return new_config(parse_evolve_args(argv, where=f"{spec_path}: run {run.name}"))

    timeout = args.eval_timeout or DEFAULT_EVAL_TIMEOUT_S
    console = Console(highlight=False, soft_wrap=True)
    view = ExperimentView(console, spec.name, len(spec.runs()), args.executor)
    runtime_devices = ("cpu",) * workers if not _gpu() else ("cuda",)
    try:
        with executor_runtime(args.executor, devices=runtime_devices, ray_address=args.ray_address), view:
            outcomes = run_experiment(
                spec, out, config_for=config_for, progress=view,
                executor_for=lambda s: make_executor(args.executor, s.toolchain.evaluator, s.toolchain.devices(),
                                                     timeout_s=timeout))
    except (ExperimentMismatchError, RayUnavailableError, MissingKeyError) as error:
        raise UsageError(str(error)) from None
    except KeyboardInterrupt:
        console.print(f"interrupted; continue with: cake experiment {spec_path} --out {out}")
        return 130
    done = sum(o.state.value == "done" for o in outcomes)
    console.print(f"{len(outcomes)} runs ({done} were already done) in {out}")
    console.print(f"report: cake experiment report {out}")
    return ExitCode.OK


def _gpu() -> bool:
    import torch

    return bool(torch.cuda.is_available())
