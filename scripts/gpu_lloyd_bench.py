"""The Lloyd iteration (our assign + update) against flash-kmeans' `batch_kmeans_Euclid` and the torch Lloyd,
per iteration, in >= 3 separate processes with bootstrap intervals.

    python3 scripts/gpu_lloyd_bench.py --out "$RES/lloyd"               # cake_cell and fk_fp16, default steps
    python3 scripts/gpu_lloyd_bench.py --out DIR --step kmeans_update=experiments/kmeans/update_onehot.cake@triton
    python3 scripts/gpu_lloyd_bench.py --out DIR --dry-run --step kmeans_assign=experiments/kmeans/triton_assign.py:assign \\
        --step kmeans_update=experiments/kmeans/update_onehot.cake@triton                    # CPU rehearsal

What `cake bench --pipeline lloyd_iteration` does once, repeated (cake.evaluation.pipeline_bench):

1. **Gates first**, in the parent: each step's kernel (default: `assign_pingpong.cake@cuda`, the fastest
   assign that passes every gate on the H200, and `update_ranked.cake@triton`, issue 18's default update — when a
   default is absent the script says so and stops) runs the contract battery on the GPU in every dtype the
   shapes use. A failure is written to the JSON and nothing is timed (exit 1).
2. **Timed processes** (one untimed warm-up first). Each process reads the cached verdicts again, then per
   shape runs the fp64 Lloyd check (experiments/kmeans/lloyd_check.py: 10 iterations on the first 2 batches
   of its first input set; ties re-synced, the first non-tie difference reported) — a failure means our
   pipeline is not timed there — and times the composed pipeline (10 iterations per call), flash-kmeans
   `batch_kmeans_Euclid(max_iters=10, tol=0)` and the torch Lloyd interleaved in a seeded shuffled order,
   cold L2, rotated inputs. Samples are stored per iteration (call time / 10).
3. **Headlines**: median over processes with the two-level bootstrap 95% interval; our speedup over the best
   of {flash_kmeans, torch} and over each alone, undefined with the reason when one is missing. Writes
   OUT/gpu_lloyd_bench.json and .md (samples in process_*.json). Expected runtime on the H200: ~3 min.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cake.experiments.kmeans.workload import LLOYD, WORKLOAD
from gpu_repeat import (
    DRY_RUN_NOTE,
    clock_and_device,
    defined_everywhere,
    now,
    require_gpu_or_dry_run,
    run_parent,
)

DEFAULT_SHAPES = ("cake_cell", "fk_fp16")
AGAINST = tuple(b.name for b in LLOYD.baselines)  # flash_kmeans, torch


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--step", action="append", default=[], metavar="OP=SOURCE",
                        help="a step's kernel, FILE.cake[@BACKEND] or PATH.py:FUNC (default: the pipeline's)")
    parser.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), help="GPU shape names")
    parser.add_argument("--processes", type=int, default=3, help="timed processes (a headline needs >= 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reps", type=int, default=20, help="timed calls (of 10 iterations) per contestant per shape")
    parser.add_argument("--max-seconds", type=float, default=3.0, help="sampling guard per shape")
    parser.add_argument("--gate-timeout", type=float, default=300.0)
    parser.add_argument("--process-timeout", type=float, default=120.0)
    parser.add_argument("--warmup-timeout", type=float, default=120.0)
    parser.add_argument("--resamples", type=int, default=4000)
    parser.add_argument("--dry-run", action="store_true", help="rehearse on the CPU (see scripts/gpu_repeat.py)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--payload", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    known = {s.name for s in WORKLOAD.op(LLOYD.inputs_from).gpu_shapes}
    bad = [s for s in args.shapes if s not in known]
    if bad:
        parser.error(f"unknown shape(s) {bad}; known: {', '.join(sorted(known))}")
    return args


def request_of(args: argparse.Namespace) -> Any:
    from cake.evaluation.pipeline_bench import PipelineRequest, resolve_steps

    spec = WORKLOAD.op(LLOYD.inputs_from)
    shapes = [spec.cpu_shape] if args.dry_run else [spec.shape(n) for n in args.shapes]
    steps = resolve_steps(LLOYD, args.step, Path.cwd())
    return PipelineRequest(LLOYD.name, steps, tuple(shapes), seed=args.seed, gate_timeout_s=args.gate_timeout,
                           reps=args.reps, max_seconds=args.max_seconds)


# ---- the worker (one process) ---------------------------------------------------------------------------------------

def run_worker(args: argparse.Namespace) -> int:
    import torch
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import TimingConfig, Verification, input_set_bytes, make_inputs, pool_size

    from cake.evaluation.bench import load_baselines
    from cake.evaluation.pipeline_bench import (
        CANDIDATE,
        load_steps,
        time_shape,
        verify_steps,
        whole_run_check,
    )
    from cake.repeated import process_payload
    from cake.stats import ProcessSamples

    clock, device, device_name = clock_and_device(args.dry_run)
    on = "cpu" if args.dry_run else "cuda"
    request = request_of(args)
    verifications = verify_steps(request, on)  # cached by the parent's run: no process times an unverified step
    refused = [f"{op} {d}: {v.detail}" for op, d, v in verifications if not v.passed]
    kernels = load_steps(request.steps) if not refused else {}
    baselines, missing = load_baselines(LLOYD, None)
    contract = get_contract(LLOYD.inputs_from)
    measured, notes = {}, {}
    for shape in request.shapes:
        dims, dtype = shape.dim_map, shape.torch_dtype
        note: dict[str, Any] = {"dims": dims, "dtype": shape.dtype}
        if refused:
            measured[shape.name] = ProcessSamples({}, {CANDIDATE: f"refused by the gates: {'; '.join(refused)}"})
            notes[shape.name] = note
            continue
        sets = [make_inputs(contract, dims, dtype, on, args.seed + 100 * args.worker + i)
                for i in range(pool_size(input_set_bytes(contract, dims, dtype), device.l2_bytes))]
        check = whole_run_check(LLOYD, kernels, sets[0])
        note["input_sets"] = len(sets)
        note["lloyd_check"] = None if check is None else check.to_json()
        if check is not None and not check.ok:
            measured[shape.name] = ProcessSamples({}, {CANDIDATE: f"failed the fp64 Lloyd check: {check.failure}"})
            notes[shape.name] = note
            continue
        dtype_name = str(dtype).removeprefix("torch.")
        verification = Verification(True, "battery", "; ".join(
            f"{op}: {v.detail}" for op, d, v in verifications if d == dtype_name))
        config = TimingConfig(warmup_calls=2, min_reps=min(10, args.reps), max_reps=args.reps,
                              max_wall_s=args.max_seconds, shuffle_seed=args.seed * 1000 + args.worker)
        measurements, _, _ = time_shape(LLOYD, shape, kernels, verification, baselines, missing, sets, clock, config,
                                        device)
        per_iteration = {m.name: tuple(t / LLOYD.iterations for t in m.times_ms)
                         for m in measurements if m.failure is None and m.times_ms}
        problems = {m.name: m.failure or "not timed" for m in measurements if m.name not in per_iteration}
        problems.update({name: f"not available: {why}" for name, why in missing})
        measured[shape.name] = ProcessSamples(per_iteration, problems)
        notes[shape.name] = note
        print(f"process {args.worker}: {shape.name} done", flush=True)
        del sets
        if not args.dry_run:
            torch.cuda.empty_cache()
    meta = {"device": device_name, "torch": torch.__version__, "date": now(), "dry_run": args.dry_run,
            "steps": {op: ref.describe() for op, ref in request.steps}, "iterations_per_call": LLOYD.iterations}
    payload = process_payload(args.worker, args.seed, meta, {LLOYD.name: measured}, {LLOYD.name: notes})
    args.payload.write_text(json.dumps(payload) + "\n")
    return 0


def worker_command(args: argparse.Namespace, index: int, payload: Path, reps: int | None) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--out", str(args.out), "--worker", str(index),
               "--payload", str(payload), "--seed", str(args.seed), "--reps", str(reps or args.reps),
               "--max-seconds", str(args.max_seconds), "--gate-timeout", str(args.gate_timeout),
               "--shapes", *args.shapes]
    for step in args.step:
        command += ["--step", step]
    return command + (["--dry-run"] if args.dry_run else [])


# ---- the parent ------------------------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    from cake.evaluation.bench import BenchSetupError

    args = parse_args(argv)
    if args.worker is not None:
        return run_worker(args)
    try:
        request = request_of(args)
    except BenchSetupError as error:
        print(f"gpu_lloyd_bench: {error}. Nothing was verified or timed.", file=sys.stderr)
        return 2
    require_gpu_or_dry_run("gpu_lloyd_bench", args.dry_run)
    from cake.evaluation.pipeline_bench import verify_steps

    args.out.mkdir(parents=True, exist_ok=True)
    verifications = verify_steps(request, "cpu" if args.dry_run else "cuda")
    gates = [{"op": op, "dtype": d, "passed": v.passed, "detail": v.detail} for op, d, v in verifications]
    for g in gates:
        print(f"gates {g['op']} {g['dtype']}: {'passed' if g['passed'] else 'FAILED'} ({g['detail']})", flush=True)
    steps = {op: ref.describe() for op, ref in request.steps}
    if not all(g["passed"] for g in gates):
        (args.out / "gpu_lloyd_bench.json").write_text(json.dumps(
            {"date": now(), "dry_run": args.dry_run, "steps": steps, "gates": gates,
             "refused": "a step failed its gates; nothing was timed"}, indent=2) + "\n")
        print("gpu_lloyd_bench: a step failed its gates; nothing was timed", file=sys.stderr)
        return 1
    _, _, device_name = clock_and_device(args.dry_run)
    result, payloads = run_parent(
        script="scripts/gpu_lloyd_bench.py", out=args.out, processes=args.processes,
        worker_command=lambda i, p, reps: worker_command(args, i, p, reps), dry_run=args.dry_run,
        process_timeout=args.process_timeout, warmup_timeout=args.warmup_timeout,
        candidates={LLOYD.name: ["ours"]}, against={LLOYD.name: AGAINST}, seed=args.seed, resamples=args.resamples,
        extra={"device": device_name, "steps": steps, "gates": gates, "iterations_per_call": LLOYD.iterations,
               "unit": "ms per Lloyd iteration"})
    if args.dry_run:
        print(DRY_RUN_NOTE)
    print((args.out / "gpu_lloyd_bench.md").read_text())
    for p in payloads:
        for shape, entry in p["ops"][LLOYD.name].items():
            check = entry.get("notes", {}).get("lloyd_check")
            print(f"process {p['process']} {shape}: fp64 Lloyd check: {check and check['summary']}")
    return 0 if defined_everywhere(result) else 1


if __name__ == "__main__":
    sys.exit(main())
