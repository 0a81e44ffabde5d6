"""Our deterministic update against flash-kmeans' update and torch index_add at every GPU shape, with the floor.

    python3 scripts/gpu_update_bench.py --out "$RES/update"      # the op's default update, 3 processes
    python3 scripts/gpu_update_bench.py --out DIR --table $RES/update_buckets.json   # a chosen bucket table
    python3 scripts/gpu_update_bench.py --out DIR --update experiments/kmeans/update_onehot.cake --shapes k128
    python3 scripts/gpu_update_bench.py --out DIR --dry-run --update experiments/kmeans/update_onehot.cake  # CPU

1. **Gates first.** The update (default: the op's default update, the bucket table `UPDATE_TABLE` of
   experiments/kmeans/workload.py, a per-shape choice of update_ranked.cake's params by the mean points per
   cluster, experiments/kmeans/update_choice.py; `--table` another table, `--update FILE.cake` one schedule
   at its defaults) runs the contract battery on the GPU in every dtype the shapes use (`cake verify`'s
   isolated worker; a cached verdict counts): a table's every configuration on its own, since the gate
   shapes reach only some buckets. A failure is written to the JSON and nothing is timed (exit 1).
2. **Timed in >= 3 separate processes** (`cake.repeated`), after one untimed warm-up process that compiles
   everything. Each process, per shape, interleaves our update, flash-kmeans 0.3.1
   `triton_centroid_update_sorted_euclid` and torch `index_add_` in one `measure` (cold L2, rotated inputs,
   CUDA events, a seeded shuffled order per rep, the fp64 reference on a sample before and after timing).
3. **Headlines**: per shape each contestant's median over processes with its two-level bootstrap 95%
   interval, our speedup over the best baseline and over each baseline alone (undefined, with the reason,
   when one is missing), and the **memory floor**: bytes moved / the H200's measured copy bandwidth
   (cake.arch: 4.25 TB/s), where bytes moved = x read once (B*N*D*s) + ids (B*N*8, int64 as the contract
   takes them) + c_old read (B*K*D*s) + c_new written (B*K*D*s), s = the element size (the kmeans_update
   contract's `bytes`). Writes OUT/gpu_update_bench.json (every process's samples are in process_*.json)
   and OUT/gpu_update_bench.md; the table's `fk/ours` column is the ratio of the medians, a reading that
   stays defined with `--processes 1` (the speedup columns need 3). Expected runtime on the H200: ~4 min (5
   shapes x 4 processes); `--processes 1 --reps 15 --max-seconds 1` ~1 min plus the gates.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cake.experiments.kmeans.update_choice import BUCKETED_LOADER, config_ref, load_table
from cake.experiments.kmeans.workload import DEFAULT_UPDATE as DEFAULT_UPDATE_NAME
from cake.experiments.kmeans.workload import FOLDER, UPDATE_TABLE, WORKLOAD
from gpu_repeat import (
    DRY_RUN_NOTE,
    clock_and_device,
    defined_everywhere,
    now,
    require_gpu_or_dry_run,
    run_parent,
    verdicts,
)

OP = "kmeans_update"
DEFAULT_UPDATE = FOLDER / DEFAULT_UPDATE_NAME
AGAINST = ("flash_kmeans", "torch_index_add")
CANDIDATE = "ours"
FLOOR_BYTES = "x read once (B*N*D*s) + ids (B*N*8) + c_old (B*K*D*s) + c_new (B*K*D*s)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--table", type=Path, help="an update bucket table (JSON; default: the op's own)")
    choice.add_argument("--update", type=Path, help="one update schedule (.cake) at its defaults")
    parser.add_argument("--backend", choices=("triton", "cuda"), default="triton", help="its lowering backend")
    parser.add_argument("--shapes", nargs="+", help="GPU shape names (default: all five)")
    parser.add_argument("--processes", type=int, default=3, help="timed processes (a headline needs >= 3)")
    parser.add_argument("--seed", type=int, default=0, help="gates, inputs, interleave order, bootstrap")
    parser.add_argument("--reps", type=int, default=30, help="timed calls per contestant per shape, at most")
    parser.add_argument("--max-seconds", type=float, default=2.0, help="sampling guard per shape")
    parser.add_argument("--gate-timeout", type=float, default=300.0, help="seconds per gate of the battery")
    parser.add_argument("--process-timeout", type=float, default=90.0)
    parser.add_argument("--warmup-timeout", type=float, default=90.0, help="the untimed compile process (0: none)")
    parser.add_argument("--resamples", type=int, default=4000)
    parser.add_argument("--dry-run", action="store_true", help="rehearse on the CPU (module docstring of gpu_repeat)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--payload", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    known = {s.name for s in WORKLOAD.op(OP).gpu_shapes}
    bad = [s for s in args.shapes or () if s not in known]
    if bad:
        parser.error(f"unknown shape(s) {bad}; known: {', '.join(sorted(known))}")
    if args.processes < 1:
        parser.error("--processes must be >= 1")
    if args.update is None and args.table is None:
        args.table = UPDATE_TABLE
    return args


def shapes_of(args: argparse.Namespace) -> list[Any]:
    spec = WORKLOAD.op(OP)
    if args.dry_run:
        return [spec.cpu_shape]
    return [spec.shape(n) for n in args.shapes] if args.shapes else list(spec.gpu_shapes)


def kernel_ref(args: argparse.Namespace) -> Any:
    from cake.lowering.runtime import SCHEDULE_LOADER
    from cake.verifier.worker_protocol import KernelRef

    if args.table is not None:
        return KernelRef.loader(BUCKETED_LOADER, str(args.table.resolve()), {"backend": args.backend})
    return KernelRef.loader(SCHEDULE_LOADER, str(args.update.resolve()), {"backend": args.backend})


def candidate_name(args: argparse.Namespace) -> str:
    return str(args.table if args.table is not None else args.update)


def gate_refs(args: argparse.Namespace, shapes: Sequence[Any]) -> dict[str, Any]:
    """What must pass the gates, by name: the schedule, or each configuration of the table that a shape runs."""
    if args.table is None:
        return {args.update.name: kernel_ref(args)}
    table = load_table(args.table)
    used = {table.choose(s.dim_map).config for s in shapes}
    return {b.describe(): config_ref(table, b, args.backend) for b in table.configs() if b.config in used}


def shape_gate(args: argparse.Namespace, shape: Any) -> str:
    """The gate_refs name that decides whether `shape` may be timed."""
    if args.table is None:
        return str(args.update.name)
    return load_table(args.table).choose(shape.dim_map).describe()


def gate_all(args: argparse.Namespace, shapes: Sequence[Any], on: str) -> dict[str, dict[str, Any]]:
    """name -> dtype -> Verification, for every gate_refs entry."""
    return {name: verdicts(OP, ref, dtypes_of(shapes), device=on, seed=args.seed, timeout_s=args.gate_timeout)
            for name, ref in gate_refs(args, shapes).items()}


def dtypes_of(shapes: Sequence[Any]) -> list[str]:
    return sorted({str(s.torch_dtype).removeprefix("torch.") for s in shapes})


def floor_rows(shapes: Sequence[Any], device: Any) -> dict[str, dict[str, float | str]]:
    from cake.verifier.registry import get_contract

    contract = get_contract(OP)
    rows: dict[str, dict[str, float | str]] = {}
    for shape in shapes:
        nbytes = contract.bytes(shape.dim_map, shape.torch_dtype)
        rows[shape.name] = {"bytes": nbytes, "bandwidth_bytes_per_s": device.bandwidth_ceiling_bytes_per_s,
                            "floor_ms": nbytes / device.bandwidth_ceiling_bytes_per_s * 1e3, "bytes_moved": FLOOR_BYTES}
    return rows


# ---- the worker (one process) ---------------------------------------------------------------------------------------

def run_worker(args: argparse.Namespace) -> int:
    import torch
    from cake.verifier.worker_main import load_kernel
    from gpu_headlines import measure_shape

    from cake.evaluation.bench import load_baselines
    from cake.repeated import process_payload

    clock, device, device_name = clock_and_device(args.dry_run)
    on = "cpu" if args.dry_run else "cuda"
    spec = WORKLOAD.op(OP)
    shapes = shapes_of(args)
    ref = kernel_ref(args)
    # The parent ran the battery; here the cached verdicts are read again, so no process times an unverified kernel.
    verified = gate_all(args, shapes, on)
    kernel = load_kernel(ref)
    if isinstance(kernel, str):
        raise SystemExit(f"gpu_update_bench: {kernel}")
    baselines, missing = load_baselines(spec, list(AGAINST))
    measured, notes = {}, {}
    for shape in shapes:
        verification = verified[shape_gate(args, shape)][str(shape.torch_dtype).removeprefix("torch.")]
        kernels = [(CANDIDATE, kernel, verification)] if verification.passed else []
        refused = {} if verification.passed else {CANDIDATE: f"failed the gates: {verification.detail}"}
        measured[shape.name], notes[shape.name] = measure_shape(
            spec, shape, kernels, refused, baselines, missing, clock, device, seed=args.seed, worker=args.worker,
            reps=args.reps, max_seconds=args.max_seconds, on=on)
        print(f"process {args.worker}: {shape.name} done", flush=True)
        if not args.dry_run:
            torch.cuda.empty_cache()
    meta = {"device": device_name, "torch": torch.__version__, "date": now(), "dry_run": args.dry_run,
            "update": candidate_name(args), "backend": args.backend}
    args.payload.write_text(json.dumps(process_payload(args.worker, args.seed, meta, {OP: measured}, {OP: notes})) + "\n")
    return 0


def worker_command(args: argparse.Namespace, index: int, payload: Path, reps: int | None) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--out", str(args.out), "--worker", str(index),
               "--payload", str(payload), "--backend", args.backend,
               *(["--table", str(args.table)] if args.table is not None else ["--update", str(args.update)]),
               "--seed", str(args.seed), "--reps", str(reps or args.reps), "--max-seconds", str(args.max_seconds),
               "--gate-timeout", str(args.gate_timeout)]
    command += ["--shapes", *args.shapes] if args.shapes else []
    return command + (["--dry-run"] if args.dry_run else [])


# ---- the parent ------------------------------------------------------------------------------------------------------

def print_table(result: dict[str, Any], floors: dict[str, dict[str, Any]]) -> None:
    rows = result["headlines"][OP]
    vs = result["speedup_vs_each_baseline"][OP]
    print(f"{'shape':<10} {'ours ms [95%]':<28} {'flash_kmeans ms':<16} {'torch ms':<10} {'floor ms':<9} "
          f"{'ours/floor':<10} {'fk/ours':<8} {'vs flash-kmeans [95%]':<28} vs best")
    def ms(row: dict[str, Any], name: str) -> str:
        t = row["time_ms"].get(name)
        return "-" if t is None else f"{t['point']:.4f}"

    def speed(s: dict[str, Any]) -> str:
        if s["value"] is None:
            return f"undefined ({s['undefined']})"
        return f"{s['value']:.3f}x [{s['interval']['low']:.3f}, {s['interval']['high']:.3f}]"

    for shape, row in rows.items():
        ours = row["time_ms"].get(CANDIDATE)
        floor = floors[shape]["floor_ms"]
        ours_text = "-" if ours is None else f"{ours['point']:.4f} [{ours['low']:.4f}, {ours['high']:.4f}]"
        ratio = "-" if ours is None else f"{ours['point'] / floor:.2f}x"
        fk = row["time_ms"].get("flash_kmeans")
        # The ratio of the medians: a reading when fewer processes ran than a headline needs (the speedup
        # columns then say undefined), never a headline itself.
        point = "-" if ours is None or fk is None else f"{fk['point'] / ours['point']:.3f}x"
        print(f"{shape:<10} {ours_text:<28} {ms(row, 'flash_kmeans'):<16} {ms(row, 'torch_index_add'):<10} {floor:<9.4f} "
              f"{ratio:<10} {point:<8} {speed(vs['flash_kmeans'][shape][CANDIDATE]):<28} {speed(row['speedup'][CANDIDATE])}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return run_worker(args)
    if args.update is not None and not args.update.is_file():
        print(f"gpu_update_bench: the update schedule {args.update} does not exist (the default is issue 18's "
              f"deterministic update, experiments/kmeans/{DEFAULT_UPDATE.name}); pass --update FILE.cake. Nothing was "
              "verified or timed.", file=sys.stderr)
        return 2
    if args.table is not None:
        load_table(args.table)  # a malformed table stops here, with what is wrong in it
    require_gpu_or_dry_run("gpu_update_bench", args.dry_run)
    args.out.mkdir(parents=True, exist_ok=True)
    shapes = shapes_of(args)
    on = "cpu" if args.dry_run else "cuda"
    _, device, device_name = clock_and_device(args.dry_run)
    gates = gate_all(args, shapes, on)
    gate_json = {name: {d: {"passed": v.passed, "detail": v.detail} for d, v in by_dtype.items()}
                 for name, by_dtype in gates.items()}
    for name, by_dtype in gates.items():
        for dtype, v in by_dtype.items():
            print(f"gates {name} {dtype} on {on}: {'passed' if v.passed else 'FAILED'} ({v.detail})", flush=True)
    for shape in shapes:
        print(f"{shape.name} runs {shape_gate(args, shape)}", flush=True)
    if not all(v.passed for by_dtype in gates.values() for v in by_dtype.values()):
        (args.out / "gpu_update_bench.json").write_text(json.dumps(
            {"date": now(), "dry_run": args.dry_run, "update": candidate_name(args), "gates": gate_json,
             "refused": "the update failed its gates; nothing was timed"}, indent=2) + "\n")
        print("gpu_update_bench: the update failed its gates; nothing was timed", file=sys.stderr)
        return 1
    floors = floor_rows(shapes, device)
    result, _ = run_parent(
        script="scripts/gpu_update_bench.py", out=args.out, processes=args.processes,
        worker_command=lambda i, p, reps: worker_command(args, i, p, reps), dry_run=args.dry_run,
        process_timeout=args.process_timeout, warmup_timeout=args.warmup_timeout, candidates={OP: [CANDIDATE]},
        against={OP: AGAINST}, seed=args.seed, resamples=args.resamples,
        extra={"device": device_name, "update": candidate_name(args), "backend": args.backend, "gates": gate_json,
               "floors": floors, "runs": {s.name: shape_gate(args, s) for s in shapes}})
    if args.dry_run:
        print(DRY_RUN_NOTE)
    print_table(result, floors)
    return 0 if defined_everywhere(result) else 1


if __name__ == "__main__":
    sys.exit(main())
