"""CAKE's Triton lowering of the plain assign against the hand-written Triton assign at one config (issue 17, item 4).

    python3 scripts/gpu_triton_vs_hand.py --out "$RES/triton_vs_hand" [--processes 3] [--config 128,128,4,2]
        [--shape cake_cell] [--seed 0] [--reps 30]
    python3 scripts/gpu_triton_vs_hand.py --out DIR --aggregate-only   # recompute from DIR/process_*.json
    python3 scripts/gpu_triton_vs_hand.py --out DIR --dry-run          # CPU (TRITON_INTERPRET=1): every path but
                                                                       # the clock, at a tiny shape

Contestants, all at the same (BN, BK, warps, stages) — by default the hand-written kernel's sweep-best cell config:

* `lowered_plain`  — `experiments/kmeans/assign_plain.cake` lowered by the Triton backend (||c||^2 per CTA);
* `lowered_norms`  — `experiments/kmeans/assign_plain_norms.cake` (||c||^2 in a first launch), its whole call:
                     the scratch fill, the norms launch and the assign launch;
* `hand_triton`    — `experiments/kmeans/triton_assign.py`'s kernel; its `prepare` (||c||^2 and the non-finite
                     rows) runs untimed, as it does as the headline baseline (RESULTS.md);
* `hand_triton_whole` — the same kernel with `prepare` inside the timed call (a host sync included), for
                     reference.

With `--graphs` each of the first three is also timed as `NAME@graph`: the call captured once per input set in a
CUDA graph and replayed, so host work (the generated launcher's checks and scratch fill, Triton's launch path)
drops out and the ratio is the kernels' device time; `lowered_*@graph` is compared with `hand_triton@graph`.

Each of `--processes` fresh processes (after one untimed warm-up process that compiles everything) times all of
them interleaved in one `measure` (cake.verifier.timing: cold L2, rotated inputs, CUDA events, seeded shuffled
order per rep, fp64 spot check before and after); the lowered kernels are first quick-checked against the fp64
reference. The parent writes `vs_hand.json` (per contestant the median over processes with its 95% interval,
each lowered kernel's speedup over `hand_triton`: > 0.95 meets the goal of matching it within 5%) and
`vs_hand.md`; and, from the warm-up process, `resources.json` with each compiled kernel's registers, spills and
shared memory, and its PTX and TTGIR under `asm/` for a line-by-line look.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "experiments" / "kmeans"
OP = "kmeans_assign"
LOWERED = {"lowered_plain": FOLDER / "assign_plain.cake", "lowered_norms": FOLDER / "assign_plain_norms.cake"}
AGAINST = ("hand_triton",)
REFERENCES = ("hand_triton_whole",)
GRAPH_AGAINST = ("hand_triton@graph",)
DRY_DIMS = {"B": 2, "N": 200, "K": 70, "D": 32}  # a tail tile in N and in K under the interpreter
GOAL = 0.95  # the lowered kernel's speedup over the hand-written one that "within 5%" means


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", default="128,128,4,2", help="BN,BK,WARPS,STAGES for every contestant")
    parser.add_argument("--shape", default="cake_cell", help="a kmeans_assign GPU shape name")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--max-seconds", type=float, default=2.0, help="sampling guard per process")
    parser.add_argument("--process-timeout", type=float, default=40.0, help="seconds per timed process")
    parser.add_argument("--warmup-timeout", type=float, default=60.0, help="seconds for the compiling process")
    parser.add_argument("--resamples", type=int, default=4000)
    parser.add_argument("--aggregate-only", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="CPU: lower, load, check and run each once")
    parser.add_argument("--graphs", action="store_true", help="also time each call replayed from a CUDA graph")
    parser.add_argument("--worker", type=int, metavar="I", help=argparse.SUPPRESS)
    parser.add_argument("--payload", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--asm", action="store_true", help=argparse.SUPPRESS)  # the worker writes resources/asm
    args = parser.parse_args(argv)
    try:
        bn, bk, warps, stages = (int(v) for v in args.config.split(","))
    except ValueError:
        parser.error(f"--config is BN,BK,WARPS,STAGES (four integers), got {args.config!r}")
    args.params = {"BN": bn, "BK": bk, "WARPS": warps, "STAGES": stages}
    return args


# ---- contestants ------------------------------------------------------------------------------------------------


def lowered(path: Path, params: dict[str, int]) -> Any:
    """The schedule lowered by the Triton backend at `params` and loaded (a `LoadedKernel`)."""
    from cake.lowering.runtime import load, lower, read_schedule

    kernel, text = read_schedule(path)
    return load(lower(kernel, "triton", params=params, filename=str(path), source_text=text))


def hand_written(params: dict[str, int]) -> tuple[Any, Any]:
    """(Prepared with the untimed prepare, Prepared timing prepare + kernel) of triton_assign.py at `params`."""
    from cake.experiments.kmeans import triton_assign
    from cake.experiments.workload import Prepared

    config = triton_assign.Config(params["BN"], params["BK"], params["WARPS"], params["STAGES"])

    def run(x: Any, c: Any, csq: Any) -> Any:
        return triton_assign.launch(x, c, csq, config)

    def whole(x: Any, c: Any) -> Any:
        return triton_assign.assign(x, c, config)

    return Prepared(run=run, prepare=triton_assign.prepare), Prepared(run=whole)


def compiled_kernels(loaded: dict[str, Any]) -> dict[str, Any]:
    """Every compiled Triton kernel of the latest GPU calls: `contestant/launch` -> the compiled kernel."""
    from cake.experiments.kmeans import triton_assign

    out = {f"hand_triton/{name}": k for name, k in triton_assign.COMPILED.items()}
    for label, kernel in loaded.items():
        module = sys.modules.get(getattr(kernel.fn, "__module__", ""))
        out.update({f"{label}/{name}": k for name, k in getattr(module, "_k_compiled", {}).items()})
    return {name: k for name, k in out.items() if hasattr(k, "n_regs")}


def write_resources(kernels: dict[str, Any], out: Path) -> dict[str, Any]:
    """Registers, spills, shared memory per compiled kernel; its PTX and TTGIR under `out/asm/`."""
    table: dict[str, Any] = {}
    asm = out / "asm"
    asm.mkdir(parents=True, exist_ok=True)
    for name, kernel in sorted(kernels.items()):
        meta = getattr(kernel, "metadata", None)
        table[name] = {"registers": kernel.n_regs, "spills": kernel.n_spills,
                       "shared_bytes": getattr(meta, "shared", None), "num_warps": getattr(meta, "num_warps", None),
                       "num_stages": getattr(meta, "num_stages", None)}
        for kind in ("ptx", "ttgir"):
            text = getattr(kernel, "asm", {}).get(kind)
            if text:
                (asm / f"{name.replace('/', '.')}.{kind}").write_text(text if isinstance(text, str) else text.decode())
    (out / "resources.json").write_text(json.dumps(table, indent=2) + "\n")
    print(f"{'kernel':<40} {'regs':>5} {'spills':>6} {'smem B':>8} {'warps':>5} {'stages':>6}")
    for name, row in table.items():
        print(f"{name:<40} {row['registers']:>5} {row['spills']:>6} {str(row['shared_bytes']):>8} "
              f"{str(row['num_warps']):>5} {str(row['num_stages']):>6}")
    return table


def graph_contestants(kernels: list[tuple[str, Any, Any]], hand: Any, shape: Any
                      ) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, Any]], dict[str, str]]:
    """The `@graph` variants of the lowered kernels and of `hand_triton`, each captured once here at the quick
    check's shape first: one that cannot be captured is left out with the reason (a CUDA or Triton runtime
    error is the one boundary), not allowed to end the process's eager measurements."""
    import torch
    from cake.experiments.workload import Prepared
    from cake.verifier.registry import get_contract
    from cake.verifier.runner import kernel_errors
    from cake.verifier.timing import GraphReplay, make_inputs

    probe = make_inputs(get_contract(OP), {"B": 2, "N": 1000, "K": 97, "D": shape.dim_map["D"]}, shape.torch_dtype,
                        "cuda", 11)
    graphs, refused = [], {}
    for label, fn, verification in kernels:
        replay = GraphReplay(fn)
        try:
            replay(*probe)
        except kernel_errors() as error:
            refused[f"{label}@graph"] = f"cannot be captured in a CUDA graph: {type(error).__name__}: {error}"
            continue
        graphs.append((f"{label}@graph", replay, verification))
    hand_replay = GraphReplay(hand.run)
    try:
        hand_replay(*hand.prepared(*probe))
    except kernel_errors() as error:
        refused["hand_triton@graph"] = f"cannot be captured in a CUDA graph: {type(error).__name__}: {error}"
        return graphs, [], refused
    torch.cuda.synchronize()
    return graphs, [("hand_triton@graph", Prepared(run=hand_replay, prepare=hand.prepare))], refused


# ---- one process ------------------------------------------------------------------------------------------------


def run_worker(args: argparse.Namespace) -> int:
    import torch
    from cake.experiments.kmeans.workload import WORKLOAD
    from cake.verifier.timing import CudaClock
    from gpu_bench_shapes import quick_verify  # a sibling script (scripts/ is on sys.path when run as a file)
    from gpu_headlines import measure_shape

    from cake.repeated import process_payload

    spec = WORKLOAD.op(OP)
    shape = spec.shape(args.shape)
    clock = CudaClock()
    assert clock.device_spec is not None, f"{clock.device_name} is not in cake.arch"
    loaded = {label: lowered(path, args.params) for label, path in LOWERED.items()}
    kernels = [(label, k, quick_verify(OP, k, [shape.torch_dtype])) for label, k in loaded.items()]
    refused = {label: f"refused by the quick check: {v.detail}" for label, _, v in kernels if not v.passed}
    kernels = [(label, k, v) for label, k, v in kernels if v.passed]
    hand, whole = hand_written(args.params)
    baselines = [("hand_triton", hand), ("hand_triton_whole", whole)]
    if args.graphs:
        graphed, graph_baselines, not_graphed = graph_contestants(kernels, hand, shape)
        kernels, baselines = kernels + graphed, baselines + graph_baselines
        refused.update(not_graphed)
    samples, notes = measure_shape(spec, shape, kernels, refused, baselines, [], clock, clock.device_spec,
                                   seed=args.seed, worker=args.worker, reps=args.reps, max_seconds=args.max_seconds)
    if args.asm:
        notes["resources"] = write_resources(compiled_kernels(loaded), args.out)
    meta = {"device": clock.device_name, "torch": torch.__version__, "config": args.params,
            "verifications": {label: v.detail for label, _, v in kernels}}
    args.payload.write_text(json.dumps(process_payload(args.worker, args.seed, meta, {OP: {shape.name: samples}},
                                                       {OP: {shape.name: notes}})) + "\n")
    return 0


def dry_run(args: argparse.Namespace) -> int:
    """Every CPU path of the worker at a tiny shape under the interpreter: lower, load, verify against the fp64
    reference, run the hand-written kernel both ways; nothing is timed (there is no GPU clock here)."""
    import torch
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import make_inputs, spot_check

    if os.environ.get("TRITON_INTERPRET") != "1":
        print("--dry-run needs TRITON_INTERPRET=1 (the CPU interpreter)", file=sys.stderr)
        return 2
    contract = get_contract(OP)
    inputs = make_inputs(contract, DRY_DIMS, torch.float32, "cpu", args.seed)
    check = spot_check(contract, torch.float32, {})
    hand, whole = hand_written(args.params)
    runs: dict[str, Callable[..., Any]] = {label: lowered(path, args.params) for label, path in LOWERED.items()}
    runs["hand_triton"] = lambda x, c: hand.run(*hand.prepared(x, c))
    runs["hand_triton_whole"] = whole.run
    failures = 0
    for label, fn in runs.items():
        reason = check(inputs, (fn(*inputs),))
        failures += reason is not None
        print(f"{label:<20} {'ok' if reason is None else 'WRONG: ' + reason}")
    args.out.mkdir(parents=True, exist_ok=True)
    write_resources({}, args.out)  # the table's path, empty: the interpreter compiles nothing
    return 1 if failures else 0


# ---- the parent -------------------------------------------------------------------------------------------------


def worker_command(args: argparse.Namespace, index: int, payload: Path, *, warmup: bool = False) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--out", str(args.out), "--worker", str(index),
               "--payload", str(payload), "--seed", str(args.seed), "--config", args.config, "--shape", args.shape,
               "--reps", "1" if warmup else str(args.reps), "--max-seconds", str(args.max_seconds)]
    return command + (["--asm"] if warmup else []) + (["--graphs"] if args.graphs else [])


def summarize(args: argparse.Namespace, payloads: Sequence[dict[str, Any]], processes: list[Any]) -> dict[str, Any]:
    from cake.repeated import aggregate, markdown

    rows = aggregate(payloads, {OP: list(LOWERED)}, {OP: AGAINST}, seed=args.seed, resamples=args.resamples)
    graph_rows = aggregate(payloads, {OP: [f"{n}@graph" for n in LOWERED]}, {OP: GRAPH_AGAINST}, seed=args.seed,
                           resamples=args.resamples) if args.graphs else {}
    result = {"command": "python3 scripts/gpu_triton_vs_hand.py " + " ".join(sys.argv[1:]), "config": args.params,
              "shape": args.shape, "goal_speedup_at_least": GOAL, "processes": processes, "headlines": rows,
              "device_time_headlines": graph_rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "vs_hand.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(rows, {OP: list(LOWERED)}, {OP: AGAINST})
    if graph_rows:
        table += "\n\n" + markdown(graph_rows, {OP: [f"{n}@graph" for n in LOWERED]}, {OP: GRAPH_AGAINST})
    (args.out / "vs_hand.md").write_text(table + "\n")
    print(table)
    for shape, row in rows.get(OP, {}).items():
        for name in (*LOWERED, *AGAINST, *REFERENCES):
            t = row["time_ms"].get(name)
            print(f"{shape} {name:<20} {'-' if t is None else json.dumps(t)}")
        speedups = dict(row["speedup"])
        speedups.update(graph_rows.get(OP, {}).get(shape, {}).get("speedup", {}))
        for name, s in speedups.items():
            if s["value"] is None:
                print(f"{shape} {name}: speedup undefined: {s['undefined']}")
                continue
            low, high = s["interval"]["low"], s["interval"]["high"]
            print(f"{shape} {name} / {s['best_baseline']} = {s['value']:.3f} [{low:.3f}, {high:.3f}]: "
                  f"{'meets' if s['value'] >= GOAL else 'misses'} the goal (>= {GOAL})")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    if args.worker is not None:
        return run_worker(args)
    if args.aggregate_only:
        paths = sorted(args.out.glob("process_*.json"))
        summarize(args, [json.loads(p.read_text()) for p in paths], [{"payload": str(p)} for p in paths])
        return 0 if len(paths) >= 3 else 1
    import torch

    from cake.repeated import load_payloads, run_processes

    if not torch.cuda.is_available():
        print("gpu_triton_vs_hand: no CUDA device; nothing was timed (try --dry-run)", file=sys.stderr)
        return 2
    os.environ.setdefault("CAKE_CACHE_DIR", str(args.out / "kernel-cache"))
    started = time.perf_counter()
    warmup = run_processes(lambda i, p: worker_command(args, i, p, warmup=True), 1, args.out / "warmup",
                           args.warmup_timeout)
    print(f"warm-up process (compiles, writes resources.json): rc={warmup[0].returncode} "
          f"in {warmup[0].seconds:.0f} s\n{warmup[0].tail}", flush=True)
    outcomes = run_processes(lambda i, p: worker_command(args, i, p), args.processes, args.out, args.process_timeout)
    result = summarize(args, load_payloads(outcomes), [o.to_json() for o in (*warmup, *outcomes)])
    print(f"{sum(o.payload is not None for o in outcomes)}/{args.processes} processes in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    defined = [s for row in result["headlines"].get(OP, {}).values() for s in row["speedup"].values()
               if s["value"] is not None]
    return 0 if defined else 1


if __name__ == "__main__":
    sys.exit(main())
