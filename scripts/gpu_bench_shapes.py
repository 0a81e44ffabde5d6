"""Baselines and our schedules at every shape of the flash_kmeans domain, on this GPU: table + JSON.

    python3 scripts/gpu_bench_shapes.py --out "$OUT"                  # both ops + the Lloyd iteration
    python3 scripts/gpu_bench_shapes.py --out "$OUT" --ops kmeans_assign --shapes cake_cell k128

Candidates are the workload's seed and reference schedules at their default params (those that load here;
the others are listed with the reason). Each candidate is verified before it is timed: `--verify quick`
(default) checks it against the fp64 reference at a tail shape (B=3 N=1000 K=97) on the GPU in every dtype
the shapes use; `--verify battery` runs the full contract battery in an isolated worker (slow). At every
shape the timing protocol re-checks a sample against the fp64 reference before and after timing.

The Lloyd iteration composes our assign and update seeds (torch's update when no update schedule loads)
and runs against flash-kmeans' `batch_kmeans_Euclid`; its output is checked for shape and finiteness only
(ties make Lloyd iterates diverge legitimately), each op having been verified on its own; the whole-run fp64
Lloyd check is `cake bench --pipeline lloyd_iteration` / `gpu_lloyd_bench.py` / `gpu_lloyd_check.py`.
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

import torch
from cake.experiments.kmeans.lloyd_check import centroids_shape_and_finite
from cake.experiments.kmeans.workload import LLOYD, WORKLOAD
from cake.experiments.schedules import load_any_backend
from cake.experiments.workload import OpSpec, Shape
from cake.lowering.runtime import BACKEND_ENV
from cake.verifier.registry import get_contract
from cake.verifier.runner import kernel_errors
from cake.verifier.timing import (
    Contestant,
    CudaClock,
    Samples,
    TimingConfig,
    Verification,
    make_inputs,
    measure,
    spot_check,
)

from cake.cli.bench import print_reports
from cake.diagnostics import DiagnosticError
from cake.evaluation.bench import ShapeReport, bench_shape, load_baselines, verdict_verification
from cake.stats import speedup_over_best

TAIL = {"B": 3, "N": 1000, "K": 97, "D": 128}


def quick_verify(op: str, kernel: Callable[..., Any], dtypes: Sequence[torch.dtype]) -> Verification:
    contract = get_contract(op)
    for dtype in dtypes:
        inputs = make_inputs(contract, TAIL, dtype, "cuda", seed=7)
        out = kernel(*inputs)
        reason = spot_check(contract, dtype, {})(inputs, (out,) if torch.is_tensor(out) else tuple(out))
        if reason is not None:
            return Verification(False, "quick check", f"{dtype}: {reason}")
    return Verification(True, "quick check", f"fp64 reference at {TAIL} in {', '.join(map(str, dtypes))}")


def battery_verify(op: str, path: Path, dtypes: Sequence[torch.dtype], timeout_s: float) -> Verification:
    from cake.lowering.runtime import SCHEDULE_LOADER
    from cake.verifier.worker import verify_in_worker
    from cake.verifier.worker_protocol import KernelRef

    ref = KernelRef.loader(SCHEDULE_LOADER, str(path))
    for dtype in dtypes:
        verdict = verify_in_worker(op, ref, device="cuda", dtypes=[str(dtype).removeprefix("torch.")], seed=0,
                                   all_gates=False, timeout_s=timeout_s)
        if not verdict.passed:
            return verdict_verification(verdict)
    return Verification(True, "battery", "every gate passed or skipped")


def load_candidates(spec: OpSpec, shapes: Sequence[Shape], mode: str,
                    timeout_s: float) -> tuple[list[tuple[str, Any, Verification]], list[tuple[str, str]]]:
    dtypes = sorted({s.torch_dtype for s in shapes}, key=str)
    ready, skipped = [], []
    for path in spec.seed_paths() + spec.reference_paths():
        if not path.is_file():
            skipped.append((path.name, "no such schedule yet"))
            continue
        try:
            backend, kernel = load_any_backend(path)
            if mode == "quick":
                verification = quick_verify(spec.contract, kernel, dtypes)
            else:  # the worker's loader picks its backend from the environment
                os.environ[BACKEND_ENV] = backend
                verification = battery_verify(spec.contract, path, dtypes, timeout_s)
        except (DiagnosticError, *kernel_errors()) as error:  # the one boundary: a load failure is a status
            skipped.append((path.name, f"does not load/run here: {type(error).__name__}: {str(error)[:160]}"))
            continue
        if not verification.passed:
            skipped.append((path.name, f"refused: {verification.detail}"))
            continue
        ready.append((f"{path.stem} ({backend})", kernel, verification))
    return ready, skipped


def pick(candidates: Sequence[tuple[str, Any, Verification]], stem: str | None) -> tuple[str, Any, Verification]:
    """The candidate loaded from the schedule `stem` (its name is "STEM (BACKEND)"), or the first one."""
    if stem is None:
        return candidates[0]
    for candidate in candidates:
        if candidate[0].split(" ")[0] == stem:
            return candidate
    raise SystemExit(f"gpu_bench_shapes: no loaded schedule `{stem}` (loaded: {[c[0] for c in candidates]})")


def bench_lloyd(shape: Shape, assign: Any, assign_name: str, update: Any, update_name: str, clock: CudaClock, config: TimingConfig,
                verification: Verification) -> dict[str, object]:
    kernels = {"kmeans_assign": assign, "kmeans_update": update}
    contestants = [Contestant(f"ours ({assign_name} + {update_name})", LLOYD.compose(kernels),
                              verification=verification)]
    unavailable = {}
    from cake.experiments.workload import BaselineUnavailable

    for baseline in LLOYD.baselines:
        try:
            prepared = baseline.load()
        except BaselineUnavailable as why:
            unavailable[baseline.name] = str(why)
            continue
        contestants.append(Contestant(baseline.name, prepared.run, prepared.prepared, candidate=False))
    contract = get_contract(LLOYD.inputs_from)
    sets = [make_inputs(contract, shape.dim_map, shape.torch_dtype, "cuda", seed=50 + i) for i in range(2)]
    samples: tuple[Samples, ...] = measure(contestants, sets, clock, centroids_shape_and_finite, config)
    per_iter = {s.name: (s.median_ms / LLOYD.iterations if s.ok else None) for s in samples}
    ours = per_iter[contestants[0].name]
    against = [b.name for b in LLOYD.baselines]  # every Lloyd baseline: one missing makes the speedup undefined
    problems = {**{s.name: s.failure or "not timed" for s in samples if not s.ok},
                **{name: f"not available: {why}" for name, why in unavailable.items()}}
    speedup = speedup_over_best(ours, per_iter, against, problems=problems)
    return {"shape": shape.to_json(), "ms_per_iteration": per_iter, "failures": {s.name: s.failure for s in samples},
            "speedup_vs_best_baseline": speedup.value, "speedup": speedup.to_json(), "unavailable": unavailable}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ops", nargs="+", default=[o.contract for o in WORKLOAD.ops])
    parser.add_argument("--shapes", nargs="+", help="shape names (default: the whole domain)")
    parser.add_argument("--verify", choices=("quick", "battery"), default="quick")
    parser.add_argument("--verify-timeout", type=float, default=600.0)
    parser.add_argument("--max-seconds", type=float, default=15.0, help="sampling guard per shape")
    parser.add_argument("--no-lloyd", action="store_true")
    parser.add_argument("--lloyd-assign", metavar="STEM", help="the assign schedule the Lloyd iteration composes "
                        "(file stem, e.g. assign_pingpong; default: the first that loads, the seed)")
    parser.add_argument("--lloyd-update", metavar="STEM", help="likewise for the update (default: the first that "
                        "loads; torch's index_add when none does)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_bench_shapes: no CUDA device; nothing was timed", file=sys.stderr)
        return 2
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    clock = CudaClock()
    device = clock.device_spec
    assert device is not None, f"{clock.device_name} is not in cake.arch"
    config = TimingConfig(warmup_calls=3, min_reps=10, max_reps=50, max_wall_s=args.max_seconds)
    result: dict[str, Any] = {"device": clock.device_name, "torch": torch.__version__, "verify": args.verify, "ops": {}}
    loaded: dict[str, list[tuple[str, Any, Verification]]] = {}
    for op in args.ops:
        spec = WORKLOAD.op(op)
        shapes = [spec.shape(name) for name in args.shapes] if args.shapes else list(spec.gpu_shapes)
        candidates, skipped = load_candidates(spec, shapes, args.verify, args.verify_timeout)
        loaded[op] = candidates
        baselines, missing = load_baselines(spec, None)
        reports: list[ShapeReport] = []
        for shape in shapes:
            if not candidates:
                break
            reports.append(bench_shape(spec, shape, candidates, baselines, clock, config, device,
                                       unavailable=[*missing, *skipped]))
            print(f"{op} {shape.name}: done at {time.perf_counter() - started:.0f} s", flush=True)
        if reports:
            print_reports(reports, title=f"{op} · {clock.device_name}")
        result["ops"][op] = {"shapes": [r.to_json() for r in reports], "skipped": dict(skipped),
                             "unavailable_baselines": dict(missing),
                             "verifications": {name: v.detail for name, _, v in candidates}}
    if not args.no_lloyd and loaded.get("kmeans_assign"):
        from cake.experiments.kmeans.baselines import torch_update_index_add

        assign_name, assign, assign_v = pick(loaded["kmeans_assign"], args.lloyd_assign)
        updates = loaded.get("kmeans_update") or []
        update_name, update = pick(updates, args.lloyd_update)[:2] if updates else \
            ("torch_index_add", torch_update_index_add)
        shapes = [WORKLOAD.op("kmeans_assign").shape(n) for n in args.shapes] if args.shapes else \
            list(WORKLOAD.op("kmeans_assign").gpu_shapes)
        result["lloyd"] = [bench_lloyd(s, assign, assign_name, update, update_name, clock, config, assign_v) for s in shapes]
        for row in result["lloyd"]:
            print(json.dumps(row))
    result["elapsed_s"] = time.perf_counter() - started
    (args.out / "gpu_bench_shapes.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
