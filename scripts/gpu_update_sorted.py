"""The deterministic counting-sort updates (update_sorted.cake, update_ranked.cake) at one or more shapes: a set
of (schedule, param assignment) variants timed interleaved with flash-kmeans' update and torch index_add (cold
L2, `cake.verifier.timing.measure`), the time of each of the first variant's five launches (torch.profiler),
and the memory floor beside them.

    python3 scripts/gpu_update_sorted.py --out "$RES/update_sorted" [--shapes fk_fp16] [--max-seconds 4]
    python3 scripts/gpu_update_sorted.py --out "$RES/ranked" --variants ranked --shapes large_n fk_fp16
    python3 scripts/gpu_update_sorted.py --out "$RES/large" --variants upd6_large --shapes large_n k128  # a bucket
    TRITON_INTERPRET=1 python3 scripts/gpu_update_sorted.py --out /tmp/x --dry-run   # CPU: lower, run, check

Each assignment is lowered by the Triton backend and must pass a quick check before it is timed: the
contract's spot check against the fp64 reference (one batch) and bit-identical outputs on two calls. The
defaults' full gates are `cake verify` (scripts/gpu/s4_update.sh stage a); the other assignments are
candidates for the search, timed here so the defaults can be chosen from H200 numbers. The floor is the
bytes the op must move (x, ids and c_old read once, c_new written once) at the measured copy bandwidth.

Writes `update_SET.json` for the first shape and `update_SET_SHAPE.json` for each further one (every sample,
the launch breakdown, the floor) and prints a table per shape.
`--dry-run` runs on the CPU at a tiny fp32 shape under the interpreter: everything but timing and profiling.
scripts/gpu_update_choose.py reads these files to choose each bucket's configuration of the op's update table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from cake.experiments.kmeans.workload import FOLDER, UPDATE, UPDATE_RANKED, UPDATE_SORTED
from cake.experiments.schedules import load_with_params
from cake.experiments.workload import Shape, parse_shape
from cake.ir.parser import parse
from cake.verifier.registry import get_contract
from cake.verifier.timing import (
    Contestant,
    CudaClock,
    TimingConfig,
    Verification,
    make_inputs,
    measure,
    spot_check,
)
from triton.compiler.errors import CompilationError
from triton.runtime.errors import OutOfResources

from cake.arch import DEVICES

SORTED = FOLDER / UPDATE_SORTED
RANKED = FOLDER / UPDATE_RANKED
DRY_SHAPE = "B=2,N=300,K=7,D=32:fp32"
LAUNCHES = ("histogram", "scan_tiles", "scan_clusters", "scatter", "reduce")
BASELINES = ("flash_kmeans", "torch_index_add")
Variant = tuple[str, Path, dict[str, int]]
# (name, schedule, params over the file's defaults); the first of a set is profiled launch by launch.
# "sorted": update_sorted's defaults, then the moves its header's cost estimate says matter: point tile (hist
# traffic vs. the scatter's BN^2 compares), rows per reduction step, warps.
# "ranked": update_ranked's defaults (BN 256 since session 6) and wider point tiles (hist size and the serial
# scan over tiles vs. the two tile sorts of rank_equal).
VARIANT_SETS: dict[str, tuple[Variant, ...]] = {
    "sorted": (
        ("sorted_default", SORTED, {}),
        ("sorted_bn256", SORTED, {"BN": 256, "SWARPS": 8}),  # the default before the 2026-12-02 sweep
        ("sorted_bn64", SORTED, {"BN": 64, "SWARPS": 4}),
        ("sorted_bn512", SORTED, {"BN": 512, "SWARPS": 16}),
        ("sorted_bc16", SORTED, {"BC": 16}),
        ("sorted_bc64_rw4", SORTED, {"BC": 64, "RWARPS": 4}),
        ("sorted_rw1", SORTED, {"RWARPS": 1}),
    ),
    "ranked": (
        ("ranked_default", RANKED, {}),
        ("ranked_bn512", RANKED, {"BN": 512}),
        ("ranked_bn1024", RANKED, {"BN": 1024}),
        ("ranked_bn2048", RANKED, {"BN": 2048, "SWARPS": 8}),
    ),
    # Issue 18, session 6: the default point tile (BN 256) against the next one at the small-cluster shapes
    # (cake_cell, fk_fp16 were never measured at BN 256) ...
    "upd6_small": (
        ("ranked_default", RANKED, {}),
        ("ranked_bn512", RANKED, {"BN": 512}),
    ),
    # ... and the reduce's tiles at the large-cluster shapes (large_n, k128: 512+ points per cluster, 16+ steps
    # of BC = 32 rows per program): more rows and warps per step, a deeper software pipeline.
    "upd6_large": (
        ("ranked_default", RANKED, {}),
        ("ranked_bc64_rw4", RANKED, {"BC": 64, "RWARPS": 4}),
        ("ranked_bc128_rw8", RANKED, {"BC": 128, "RWARPS": 8}),
        ("ranked_bc128_rw8_rs4", RANKED, {"BC": 128, "RWARPS": 8, "RSTAGES": 4}),
        # BN 256 doubles scan_tiles' serial walk over the tiles at B=1 (4096 tiles, 64 programs): half as many steps.
        ("ranked_bc128_rw8_bt256", RANKED, {"BC": 128, "RWARPS": 8, "BT": 256}),
    ),
    # The reduce's column split (BD): D / BD programs per cluster, more gathers in flight at B = 1 (session 6's
    # large_n reduce: 1024 programs of 2 warps, 0.124 ms against a 0.065 ms floor for the whole op).
    "bd": (
        ("ranked_default", RANKED, {}),
        ("ranked_bd64", RANKED, {"BD": 64}),
        ("ranked_bd32", RANKED, {"BD": 32}),
        ("ranked_bd32_rw1", RANKED, {"BD": 32, "RWARPS": 1}),
        ("ranked_bc64_rw4_bd64", RANKED, {"BC": 64, "RWARPS": 4, "BD": 64}),
    ),
}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def quick_check(run: Callable[..., Any], inputs: tuple[Any, ...], check: Callable[..., str | None]) -> Verification:
    """The fp64 spot check, and the same bits on a second call (ORD-02's property, at the timed shape)."""
    first = run(*inputs)
    second = run(*inputs)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    reason = check(inputs, (first,))
    if reason is not None:
        return Verification(False, "quick check", f"spot check: {reason}")
    if not torch.equal(first.view(torch.int16 if first.element_size() == 2 else torch.int32),
                       second.view(torch.int16 if second.element_size() == 2 else torch.int32)):
        return Verification(False, "quick check", "two calls on the same inputs gave different bits")
    return Verification(True, "quick check", "fp64 spot check and bit-identical repeat (gates: cake verify)")


def floor_ms(shape: Shape) -> float:
    d = shape.dim_map
    elem = torch.empty((), dtype=DTYPES[shape.dtype]).element_size()
    moved = d["B"] * d["N"] * (d["D"] * elem + 8) + 2 * d["B"] * d["K"] * d["D"] * elem
    return moved / DEVICES["H200"].bandwidth_ceiling_bytes_per_s * 1e3


def launch_breakdown(run: Callable[..., Any], inputs: tuple[Any, ...], schedule: str,
                     calls: int = 5) -> dict[str, float]:
    """Mean GPU time per call of each launch (ms) of `schedule`, from the profiler's kernel records."""
    from torch.profiler import ProfilerActivity, profile

    run(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run(*inputs)
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        name = next((launch for launch in LAUNCHES if event.key.endswith(f"{schedule}_{launch}")), None)
        key = name or ("fill (scratch zeroing)" if "fill" in event.key.lower() or "zero" in event.key.lower() else None)
        if key is not None:
            device_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0.0)
            totals[key] = totals.get(key, 0.0) + device_us / 1e3 / calls
    return totals


def run_shape(args: argparse.Namespace, variants: tuple[Variant, ...], shape: Shape, out_file: Path) -> bool:
    """Quick-check, time and profile the variants at one shape; write `out_file`. True when any variant passed."""
    device = "cpu" if args.dry_run else "cuda"
    dtype = DTYPES[shape.dtype]
    contract = get_contract(UPDATE.contract)
    inputs = tuple(t for t in make_inputs(contract, shape.dim_map, dtype, device, seed=0) if t is not None)
    check = spot_check(contract, dtype, dict(UPDATE.spot_sample))

    contestants: list[Contestant] = []
    rows: dict[str, dict[str, Any]] = {}
    for name, schedule, params in variants:
        run = load_with_params(schedule, params, backend="triton")
        try:
            verification = quick_check(run, inputs, check)
        except (OutOfResources, CompilationError) as error:  # a tile too big for this GPU: that variant only
            verification = Verification(False, "compile", f"{type(error).__name__}: {error}"[:300])
        rows[name] = {"schedule": schedule.name, "params": params, "verified": verification.passed,
                      "detail": verification.detail}
        print(f"{name:18s} {'ok' if verification.passed else 'REFUSED'}: {verification.detail}", flush=True)
        if verification.passed:
            contestants.append(Contestant(name, run, verification=verification))
    result: dict[str, Any] = {"shape": shape.name, "dims": shape.dim_map, "dtype": shape.dtype,
                              "floor_ms": floor_ms(shape), "variants": rows}
    if not args.dry_run:
        for baseline in (b for b in UPDATE.baselines if b.name in BASELINES):
            contestants.append(Contestant(baseline.name, baseline.load().run, candidate=False))
        samples = measure(contestants, [inputs], CudaClock(), check,
                          TimingConfig(max_wall_s=args.max_seconds, shuffle_seed=0))
        result["samples"] = {s.name: {"times_ms": list(s.times_ms), "failure": s.failure} for s in samples}
        fk = next((s for s in samples if s.name == "flash_kmeans" and s.ok), None)
        print(f"\n{shape.name} {shape.dim_map} {shape.dtype}: floor {result['floor_ms']:.3f} ms")
        print(f"{'contestant':18s} {'median ms':>10s} {'p10':>8s} {'p90':>8s} {'x flash-kmeans':>15s}")
        for s in samples:
            if not s.ok:
                print(f"{s.name:18s} failed: {s.failure}")
                continue
            speedup = f"{fk.median_ms / s.median_ms:.3f}" if fk is not None else "undefined"
            print(f"{s.name:18s} {s.median_ms:10.4f} {s.quantile_ms(0.1):8.4f} {s.quantile_ms(0.9):8.4f} {speedup:>15s}")
        out_file.write_text(json.dumps(result, indent=2))  # the timings are kept if profiling fails
        first_name, first_schedule, _ = variants[0]
        first = next((c for c in contestants if c.name == first_name), None)
        if first is not None:
            schedule_name = parse(first_schedule.read_text(), str(first_schedule)).name
            breakdown = launch_breakdown(first.run, inputs, schedule_name)
            result["launch_ms"] = breakdown
            print(f"\n{first_name}, per launch (profiler, mean of 5 calls):")
            for launch, ms in breakdown.items():
                print(f"  {launch:22s} {ms:8.4f} ms")
    out_file.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out_file}", flush=True)
    return any(r["verified"] for r in rows.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shapes", nargs="+", default=["fk_fp16"],
                    help="shapes of the workload's domain, or B=..,N=..,K=..,D=..:fp16")
    ap.add_argument("--variants", choices=sorted(VARIANT_SETS), default="sorted", help="which variant set to time")
    ap.add_argument("--max-seconds", type=float, default=4.0, help="timing wall-clock guard per shape")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny fp32 shape, interpreter: no timing")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    variants = VARIANT_SETS[args.variants]
    names = [DRY_SHAPE] if args.dry_run else args.shapes
    passed = True
    for index, name in enumerate(names):
        shape = parse_shape(name, UPDATE.gpu_shapes, "fp16")
        suffix = "" if index == 0 else f"_{shape.name}"
        passed = run_shape(args, variants, shape, args.out / f"update_{args.variants}{suffix}.json") and passed
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
