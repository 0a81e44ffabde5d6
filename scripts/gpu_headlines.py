"""Headline figures against the best baseline, each the median of >= 3 separate processes with a 95% interval.

    python3 scripts/gpu_headlines.py --out "$RES/headlines" [--processes 3] [--seed 0]
        [--ops kmeans_assign kmeans_update] [--shapes cake_cell fk_fp16] [--triton-configs TABLE.json]
    python3 scripts/gpu_headlines.py --out DIR --aggregate-only      # recompute from DIR/process_*.json

The parent first runs one untimed warm-up worker (one rep: it compiles every kernel into the disk caches and
is not counted), then `--processes` fresh worker processes one after another. Each worker, per op and shape, times
every headline kernel and every baseline interleaved in one `measure` (cake.verifier.timing: cold L2, rotated
inputs, CUDA events, a seeded shuffled order per rep, fp64 spot check before and after timing) and writes
every sample. Headline kernels: for assign the hand-written ping-pong (`assign_pingpong.cake`, CUDA backend),
the evolved best of the H200 run (when its file is present) and `assign_plain.cake` lowered by the Triton
backend; for update `update_onehot.cake` and `update_atomic.cake` (Triton). Baselines a speedup is over:
assign — the hand-written Triton assign at its per-shape tuned config (`--triton-configs`, the sweep's
table), flash-kmeans 0.3.1 and torch; update — flash-kmeans and torch. `plain_sweep_best` (CAKE's lowering of
the seed at DESIGN.md's sweep config) is timed alongside as a reference. Every kernel is verified in each
worker by a quick check first (fp64 reference at a tail shape, B=3 N=1000 K=97, in each dtype timed; the
full battery verdicts are separate runs); a kernel that fails it is not timed and says so.

The parent then writes `headlines.json` (every process's payload path, per shape each contestant's median
over processes with its interval, each kernel's speedup over the best baseline with its interval, or
undefined with the reason) and `headlines.md` (the RESULTS.md table). `update_atomic` passes the quick check
but fails ORD-02/POISON/EXC-02 of the battery on the H200: its figure is a comparison, not a result.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.experiments.kmeans.workload import FITNESS_BASELINES, FOLDER, WORKLOAD

from cake.repeated import aggregate, load_payloads, markdown, process_payload, run_processes

REPO = Path(__file__).resolve().parents[1]
EVOLVED_BEST = REPO / "results" / "h200-2026-11-30" / "s2" / "evolve2" / "best.cake"
TRITON_CONFIGS_ENV = "CAKE_TRITON_ASSIGN_CONFIGS"


@dataclass(frozen=True, slots=True)
class Headline:
    name: str
    op: str
    path: Path
    backend: str


HEADLINES: tuple[Headline, ...] = (
    Headline("assign_pingpong", "kmeans_assign", FOLDER / "assign_pingpong.cake", "cuda"),
    Headline("evolved_best", "kmeans_assign", EVOLVED_BEST, "cuda"),
    Headline("assign_plain_triton", "kmeans_assign", FOLDER / "assign_plain.cake", "triton"),
    Headline("update_onehot", "kmeans_update", FOLDER / "update_onehot.cake", "triton"),
    Headline("update_atomic", "kmeans_update", FOLDER / "update_atomic.cake", "triton"),
)
# The baselines each op's speedup is over; the assign's are the workload fitness's.
AGAINST: dict[str, tuple[str, ...]] = {"kmeans_assign": FITNESS_BASELINES,
                                       "kmeans_update": ("flash_kmeans", "torch_index_add")}
REFERENCES: dict[str, tuple[str, ...]] = {"kmeans_assign": ("plain_sweep_best",), "kmeans_update": ()}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--processes", type=int, default=3, help="separate processes (a headline needs >= 3)")
    parser.add_argument("--seed", type=int, default=0, help="inputs, interleave order and bootstrap")
    parser.add_argument("--ops", nargs="+", default=list(AGAINST), choices=list(AGAINST))
    parser.add_argument("--shapes", nargs="+", help="shape names (default: the whole domain)")
    parser.add_argument("--kernels", nargs="+", help="headline kernel names (default: all that exist)")
    parser.add_argument("--reps", type=int, default=30, help="timed calls per contestant per shape, at most")
    parser.add_argument("--max-seconds", type=float, default=2.0, help="sampling guard per shape")
    parser.add_argument("--process-timeout", type=float, default=150.0, help="seconds per timed worker process")
    parser.add_argument("--warmup-timeout", type=float, default=150.0,
                        help="seconds for the untimed first process that compiles every kernel (0: none)")
    parser.add_argument("--triton-configs", type=Path, help="the sweep's table for the hand-written Triton baseline")
    parser.add_argument("--resamples", type=int, default=4000, help="bootstrap resamples")
    parser.add_argument("--aggregate-only", action="store_true", help="recompute from OUT/process_*.json")
    parser.add_argument("--worker", type=int, metavar="I", help=argparse.SUPPRESS)
    parser.add_argument("--payload", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be >= 1")
    known = {s.name for s in WORKLOAD.op("kmeans_assign").gpu_shapes}
    bad = [s for s in args.shapes or () if s not in known]
    if bad:
        parser.error(f"unknown shape(s) {bad}; known: {', '.join(sorted(known))}")
    names = {h.name for h in HEADLINES}
    bad = [k for k in args.kernels or () if k not in names]
    if bad:
        parser.error(f"unknown kernel(s) {bad}; known: {', '.join(sorted(names))}")
    return args


def selected(args: argparse.Namespace) -> list[Headline]:
    return [h for h in HEADLINES if h.op in args.ops and (not args.kernels or h.name in args.kernels)]


def candidate_names(args: argparse.Namespace) -> dict[str, list[str]]:
    return {op: [h.name for h in selected(args) if h.op == op] for op in args.ops}


def worker_command(args: argparse.Namespace, index: int, payload: Path, reps: int | None = None) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--out", str(args.out), "--worker", str(index),
               "--payload", str(payload), "--seed", str(args.seed), "--reps", str(reps or args.reps),
               "--max-seconds", str(args.max_seconds), "--ops", *args.ops]
    if args.shapes:
        command += ["--shapes", *args.shapes]
    if args.kernels:
        command += ["--kernels", *args.kernels]
    return command


# ---- the worker (one process, on the GPU) ---------------------------------------------------------------------


def _load(headline: Headline, dtypes: Sequence[Any]) -> tuple[Any, str | None, str]:
    """(kernel or None, why not, verification detail): loaded by its backend and quick-checked."""
    from cake.experiments.schedules import load_schedule_file
    from cake.verifier.runner import kernel_errors
    from gpu_bench_shapes import quick_verify  # a sibling script (scripts/ is on sys.path when run as a file)

    from cake.diagnostics import DiagnosticError

    if not headline.path.is_file():
        return None, f"no schedule at {headline.path}", ""
    try:
        kernel = load_schedule_file(headline.path, headline.backend)
        verification = quick_verify(headline.op, kernel, dtypes)
    except (DiagnosticError, *kernel_errors()) as error:  # the one boundary: a load failure is a status
        return None, f"does not load/run here: {type(error).__name__}: {str(error)[:200]}", ""
    if not verification.passed:
        return None, f"refused by the quick check: {verification.detail}", verification.detail
    return kernel, None, verification.detail


def measure_shape(spec: Any, shape: Any, kernels: Sequence[tuple[str, Any, Any]], refused: dict[str, str],
                  baselines: Sequence[tuple[str, Any]], missing: Sequence[tuple[str, str]], clock: Any, device: Any,
                  *, seed: int, worker: int, reps: int, max_seconds: float, on: str = "cuda"
                  ) -> tuple[Any, dict[str, Any]]:
    """One process's measurement of one shape: every kernel and baseline interleaved in one `measure` (seeded
    shuffled order), as `ProcessSamples` (every sample; why each contestant without a time has none) and notes."""
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import (
        Contestant,
        TimingConfig,
        input_set_bytes,
        make_inputs,
        measure,
        pool_size,
        spot_check,
    )

    from cake.stats import ProcessSamples

    contract = get_contract(spec.contract)
    dims, dtype = shape.dim_map, shape.torch_dtype
    n_sets = pool_size(input_set_bytes(contract, dims, dtype), device.l2_bytes)
    sets = [make_inputs(contract, dims, dtype, on, seed + 100 * worker + i) for i in range(n_sets)]
    contestants = [Contestant(name, fn, verification=v) for name, fn, v in kernels]
    contestants += [Contestant(name, p.run, p.prepared, candidate=False) for name, p in baselines]
    config = TimingConfig(warmup_calls=3, min_reps=min(10, reps), max_reps=reps, max_wall_s=max_seconds,
                          shuffle_seed=seed * 1000 + worker)
    samples = measure(contestants, sets, clock, spot_check(contract, dtype, dict(spec.spot_sample), seed), config)
    problems = {s.name: s.failure or "not timed" for s in samples if not s.ok}
    problems.update(refused)
    problems.update({name: f"not available: {why}" for name, why in missing})
    choice = {name: getattr(p.run, "last_choice", None) for name, p in baselines}
    notes = {"dims": dims, "dtype": shape.dtype, "input_sets": n_sets,
             "verifications": {name: v.detail for name, _, v in kernels},
             **{f"{name}_config": c.describe() for name, c in choice.items() if c is not None}}
    return ProcessSamples({s.name: s.times_ms for s in samples if s.ok}, problems), notes


def run_worker(args: argparse.Namespace) -> int:
    import torch
    from cake.verifier.timing import CudaClock, Verification

    from cake.evaluation.bench import load_baselines
    from cake.stats import ProcessSamples

    clock = CudaClock()
    device = clock.device_spec
    assert device is not None, f"{clock.device_name} is not in cake.arch"
    measured: dict[str, dict[str, ProcessSamples]] = {}
    notes: dict[str, dict[str, dict[str, Any]]] = {}
    for op in args.ops:
        spec = WORKLOAD.op(op)
        shapes = [spec.shape(n) for n in args.shapes] if args.shapes else list(spec.gpu_shapes)
        dtypes = sorted({s.torch_dtype for s in shapes}, key=str)
        kernels, refused = [], {}
        for headline in (h for h in selected(args) if h.op == op):
            kernel, why, detail = _load(headline, dtypes)
            if kernel is None:
                refused[headline.name] = str(why)
            else:
                kernels.append((headline.name, kernel, Verification(True, "quick check", detail)))
        baselines, missing = load_baselines(spec, [*AGAINST[op], *REFERENCES[op]])
        measured[op], notes[op] = {}, {}
        for shape in shapes:
            measured[op][shape.name], notes[op][shape.name] = measure_shape(
                spec, shape, kernels, refused, baselines, missing, clock, device, seed=args.seed, worker=args.worker,
                reps=args.reps, max_seconds=args.max_seconds)
            print(f"process {args.worker}: {op} {shape.name} done", flush=True)
            torch.cuda.empty_cache()
    meta = {"device": clock.device_name, "torch": torch.__version__,
            "triton_configs": os.environ.get(TRITON_CONFIGS_ENV), "date": _now()}
    args.payload.write_text(json.dumps(process_payload(args.worker, args.seed, meta, measured, notes)) + "\n")
    return 0


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# ---- the parent ----------------------------------------------------------------------------------------------


def write_headlines(args: argparse.Namespace, payloads: Sequence[dict[str, Any]],
                    processes: Sequence[dict[str, object]]) -> dict[str, Any]:
    names = candidate_names(args)
    against = {op: AGAINST[op] for op in args.ops}
    headlines = aggregate(payloads, names, against, seed=args.seed, resamples=args.resamples)
    result = {"date": _now(), "command": "python3 scripts/gpu_headlines.py " + " ".join(sys.argv[1:]),
              "seed": args.seed, "processes": list(processes), "against": against,
              "references": {op: REFERENCES[op] for op in args.ops}, "candidates": names, "headlines": headlines}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "headlines.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "headlines.md").write_text(markdown(headlines, names, against) + "\n")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.triton_configs is not None:
        os.environ[TRITON_CONFIGS_ENV] = str(args.triton_configs.resolve())
    if args.worker is not None:
        return run_worker(args)
    if args.aggregate_only:
        paths = sorted(args.out.glob("process_*.json"))
        payloads = [json.loads(p.read_text()) for p in paths]
        write_headlines(args, payloads, [{"payload": str(p)} for p in paths])
        print((args.out / "headlines.md").read_text())
        return 0 if len(payloads) >= 3 else 1
    import torch

    if not torch.cuda.is_available():
        print("gpu_headlines: no CUDA device; nothing was timed", file=sys.stderr)
        return 2
    started = time.perf_counter()
    warmup = []
    if args.warmup_timeout > 0:
        # Compiles every kernel into the disk caches (Triton's, CAKE's nvcc cache, flash-kmeans'), so the timed
        # processes spend their time measuring and their timeouts do not depend on cold compiles. Not counted.
        warmup = run_processes(lambda i, payload: worker_command(args, i, payload, reps=1), 1, args.out / "warmup",
                               args.warmup_timeout)
        print(f"warm-up process: rc={warmup[0].returncode} in {warmup[0].seconds:.0f} s", flush=True)
    outcomes = run_processes(lambda i, payload: worker_command(args, i, payload), args.processes, args.out,
                             args.process_timeout)
    result = write_headlines(args, load_payloads(outcomes), [o.to_json() for o in (*warmup, *outcomes)])
    print((args.out / "headlines.md").read_text())
    print(f"{sum(o.payload is not None for o in outcomes)}/{args.processes} processes finished in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    defined = [s for rows in result["headlines"].values() for row in rows.values() for s in row["speedup"].values()
               if s["value"] is not None]
    return 0 if defined else 1


if __name__ == "__main__":
    sys.exit(main())
