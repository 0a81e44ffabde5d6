"""Tune the hand-written Triton assign (`experiments/kmeans/triton_assign.py`) per shape; write the table of best configs.

    python3 scripts/sweep_triton_assign.py --out "$RES/triton_assign_configs.json" [--shapes cake_cell k128]
        [--bn 128 256] [--bk 32 64 128] [--warps 4 8] [--stages 2 3] [--budget-s 150]

At each shape of the flash_kmeans domain (or those named) every config of the grid that survives pruning
(`enumerate_configs`: fp32 accumulator registers per thread and pipelined shared memory within the target's
limits) is timed under CAKE's protocol, all configs interleaved in one process (cold L2, rotated inputs,
CUDA events, seeded shuffled order, median), each checked against the fp64 reference on a sample before and
after timing. A config that fails to compile or to run is recorded with the reason. The table holds, per
shape key (`B=..,N=..,K=..,D=..:dtype`), the best config, its median and every config's result, with the
provenance (device, versions, grid, timing settings, command, date). `baselines.load_triton_assign` reads
it; commit the H200's output as `experiments/kmeans/triton_assign_configs.json`.

The wall-clock budget (`--budget-s`) bounds GPU time (compiles dominate it: every config compiles once per
`compile_class`, so shapes that share a class go first): once spent, the remaining shapes are listed as not
swept (they then run the untuned default, and say so), never silently dropped.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.experiments.kmeans.shapes import GPU_SHAPES
from cake.experiments.workload import Shape

from cake.arch import ARCHS, DeviceSpec

DEFAULT_BN = (128, 256)
DEFAULT_BK = (32, 64, 128)
DEFAULT_WARPS = (4, 8)
DEFAULT_STAGES = (2, 3)
MAX_ACC_REGS_PER_THREAD = 128  # fp32 accumulator registers per thread above which the kernel spills
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


@dataclass(frozen=True, slots=True)
class Grid:
    bn: tuple[int, ...] = DEFAULT_BN
    bk: tuple[int, ...] = DEFAULT_BK
    warps: tuple[int, ...] = DEFAULT_WARPS
    stages: tuple[int, ...] = DEFAULT_STAGES

    def to_json(self) -> dict[str, list[int]]:
        return {"bn": list(self.bn), "bk": list(self.bk), "warps": list(self.warps), "stages": list(self.stages)}


@dataclass(frozen=True, slots=True)
class Pruned:
    config: Any  # triton_assign.Config
    reason: str


def smem_bytes(bn: int, bk: int, stages: int, bd: int, elem_bytes: int) -> int:
    """Shared memory a pipelined launch needs: the point tile once, `stages` centroid tiles in flight."""
    return (bn * bd + stages * bk * bd) * elem_bytes


def enumerate_configs(grid: Grid, d: int, dtype: str, smem_limit_bytes: int) -> tuple[list[Any], list[Pruned]]:
    """(configs to time, configs pruned with the reason), in grid order."""
    from cake.experiments.kmeans.triton_assign import MAX_ONE_CHUNK_D, Config, chunk_for

    bd, _ = chunk_for(d)
    keep: list[Any] = []
    pruned: list[Pruned] = []
    for bn, bk, warps, stages in itertools.product(grid.bn, grid.bk, grid.warps, grid.stages):
        config = Config(bn, bk, warps, stages)
        acc = bn * bk // (32 * warps)
        smem = smem_bytes(bn, bk, stages, bd, DTYPE_BYTES[dtype])
        if acc > MAX_ACC_REGS_PER_THREAD:
            pruned.append(Pruned(config, f"{acc} fp32 accumulator registers per thread > {MAX_ACC_REGS_PER_THREAD}"))
        elif smem > smem_limit_bytes:
            pruned.append(Pruned(config, f"{smem} B of pipelined shared memory > {smem_limit_bytes} B"))
        elif d <= MAX_ONE_CHUNK_D and bn * bd // (32 * warps) > 2 * MAX_ACC_REGS_PER_THREAD:
            pruned.append(Pruned(config, f"a {bn}x{bd} point tile in registers is too large for {warps} warps"))
        else:
            keep.append(config)
    return keep, pruned


def compile_class(shape: Shape) -> tuple[str, int, bool, bool]:
    """What makes Triton compile a new variant of the kernel: dtype, D (the tile width) and whether N and K are
    multiples of 16 (Triton specializes integer arguments and strides on that)."""
    dims = shape.dim_map
    return shape.dtype, dims["D"], dims["N"] % 16 == 0, dims["K"] % 16 == 0


def compile_order(shapes: Sequence[Shape]) -> list[Shape]:
    """Shapes grouped by compile class, in order of first appearance: under a time budget, the shapes that
    reuse already compiled variants are swept before a shape that needs a new set of compiles."""
    classes: list[tuple[str, int, bool, bool]] = []
    for shape in shapes:
        if compile_class(shape) not in classes:
            classes.append(compile_class(shape))
    return sorted(shapes, key=lambda s: classes.index(compile_class(s)))


@dataclass(frozen=True, slots=True)
class CompileJob:
    """Compile one config for one compile class, on small inputs of that class (same dtype and D, N and K of
    the same divisibility by 16), so that the sweep's launch at the real shape finds it in Triton's disk cache."""

    config: tuple[int, int, int, int]  # bn, bk, warps, stages
    dtype: str
    d: int
    n16: bool
    k16: bool
    device: str = "cuda"


def compile_jobs(shapes: Sequence[Shape], configs_for: Any) -> list[CompileJob]:
    """One job per (compile class, config to time), in sweep order; `configs_for(shape)` gives a shape's configs."""
    jobs: list[CompileJob] = []
    for shape in shapes:
        dtype, d, n16, k16 = compile_class(shape)
        for config in configs_for(shape):
            job = CompileJob((config.bn, config.bk, config.warps, config.stages), dtype, d, n16, k16)
            if job not in jobs:
                jobs.append(job)
    return jobs


def run_compile_job(job: CompileJob) -> str | None:
    """Compile (by one launch) in this process; None when it compiled, else why not (a refusal is not a crash:
    the sweep records it again at the shape)."""
    import torch
    from cake.experiments.kmeans import triton_assign
    from cake.verifier.runner import kernel_errors
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[job.dtype]
    n, k = (256 if job.n16 else 264 + 1), (64 if job.k16 else 72 + 1)  # 265, 73: not multiples of 16, not 1
    gen = torch.Generator(device=job.device).manual_seed(0)
    x = torch.randn(1, n, job.d, generator=gen, device=job.device).to(dtype)
    c = torch.randn(1, k, job.d, generator=gen, device=job.device).to(dtype)
    try:
        triton_assign.launch(*triton_assign.prepare(x, c), config=triton_assign.Config(*job.config))
        if job.device == "cuda":
            torch.cuda.synchronize()
    except (*kernel_errors(), OutOfResources, CompilationError) as error:
        return f"{type(error).__name__}: {str(error)[:200]}"
    return None


def precompile(jobs: Sequence[CompileJob], workers: int) -> dict[str, Any]:
    """Run the compile jobs on a pool of `workers` fresh processes (compiles are CPU work; the GPU idles
    meanwhile, so this is what shortens the sweep's GPU time). Returns a summary for the provenance."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    started = time.perf_counter()
    failures: dict[str, str] = {}
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for job, why in zip(jobs, pool.map(run_compile_job, jobs), strict=True):
                if why is not None:
                    failures[f"{job.config} {job.dtype} D={job.d}"] = why
    except BrokenProcessPool as broken:  # the sweep still compiles whatever is missing, serially
        return {"jobs": len(jobs), "workers": workers, "seconds": time.perf_counter() - started,
                "broken": str(broken), "failures": failures}
    return {"jobs": len(jobs), "workers": workers, "seconds": time.perf_counter() - started, "failures": failures}


def shape_key_of(shape: Shape) -> str:
    from cake.experiments.kmeans.triton_assign import shape_key

    dims = shape.dim_map
    return shape_key(dims["B"], dims["N"], dims["K"], dims["D"], shape.dtype)


def table_row(shape: Shape, results: Sequence[dict[str, Any]], pruned: Sequence[Pruned]) -> dict[str, Any]:
    """One shape's entry: every config's result, the pruned ones, and the best (smallest median) that passed."""
    timed = [r for r in results if r.get("median_ms") is not None]
    best = min(timed, key=lambda r: r["median_ms"]) if timed else None
    return {"shape": shape.to_json(), "best": best["config"] if best else None,
            "best_ms": best["median_ms"] if best else None, "configs": list(results),
            "pruned": [{"config": p.config.to_json(), "reason": p.reason} for p in pruned]}


def write_table(path: Path, provenance: dict[str, Any], rows: dict[str, dict[str, Any]],
                not_swept: dict[str, str]) -> dict[str, Any]:
    """Write the table; only shapes with a best config go under `shapes` (what the baseline reads)."""
    payload = {"provenance": provenance, "shapes": {k: v for k, v in rows.items() if v["best"] is not None},
               "failed": {k: v for k, v in rows.items() if v["best"] is None}, "not_swept": not_swept}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return payload


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the table (JSON) to write")
    parser.add_argument("--shapes", nargs="+", help="shape names of the flash_kmeans domain (default: all)")
    parser.add_argument("--bn", type=int, nargs="+", default=list(DEFAULT_BN))
    parser.add_argument("--bk", type=int, nargs="+", default=list(DEFAULT_BK))
    parser.add_argument("--warps", type=int, nargs="+", default=list(DEFAULT_WARPS))
    parser.add_argument("--stages", type=int, nargs="+", default=list(DEFAULT_STAGES))
    parser.add_argument("--reps", type=int, default=20, help="timed calls per config, at most")
    parser.add_argument("--max-seconds", type=float, default=3.0, help="sampling guard per shape")
    parser.add_argument("--budget-s", type=float, default=150.0, help="no new shape starts after this many seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile-workers", type=int, default=8,
                        help="processes that compile every config first, in parallel (0: compile serially)")
    args = parser.parse_args(argv)
    known = {s.name: s for s in GPU_SHAPES}
    unknown = [name for name in args.shapes or () if name not in known]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}; known: {', '.join(known)}")
    args.shape_list = compile_order([known[name] for name in args.shapes] if args.shapes else list(GPU_SHAPES))
    args.grid = Grid(tuple(args.bn), tuple(args.bk), tuple(args.warps), tuple(args.stages))
    return args


def sweep_shape(shape: Shape, configs: Sequence[Any], clock: Any, device: DeviceSpec, args: argparse.Namespace,
                on: str = "cuda") -> list[dict[str, Any]]:
    """Time every config at `shape`, interleaved; a config that does not compile or run is a result too."""
    from cake.experiments.kmeans import triton_assign
    from cake.experiments.kmeans.workload import ASSIGN
    from cake.verifier.registry import get_contract
    from cake.verifier.runner import kernel_errors
    from cake.verifier.timing import (
        Contestant,
        TimingConfig,
        input_set_bytes,
        make_inputs,
        measure,
        pool_size,
        spot_check,
        summarize,
    )

    contract = get_contract("kmeans_assign")
    dims, dtype = shape.dim_map, shape.torch_dtype
    n_sets = pool_size(input_set_bytes(contract, dims, dtype), device.l2_bytes)
    sets = [make_inputs(contract, dims, dtype, on, args.seed + i) for i in range(n_sets)]
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    # named as well as through kernel_errors(): on a Triton without `triton.errors` they are not TritonErrors
    refusals = (*kernel_errors(), OutOfResources, CompilationError)
    results: list[dict[str, Any]] = []
    contestants = []
    probe = triton_assign.prepare(*sets[0])
    for config in configs:
        try:  # compile and run once: Triton's own refusals (out of resources) are a result, not a crash
            triton_assign.launch(*probe, config=config)
            clock.synchronize()
        except refusals as error:
            results.append({"config": config.to_json(), "median_ms": None,
                            "failure": f"does not compile/run: {type(error).__name__}: {str(error)[:200]}"})
            continue
        contestants.append(Contestant(config.key, _bound(triton_assign.launch, config), triton_assign.prepare,
                                      candidate=False))
    timing = TimingConfig(warmup_calls=2, min_reps=min(5, args.reps), max_reps=args.reps,
                          max_wall_s=args.max_seconds, shuffle_seed=args.seed)
    samples = measure(contestants, sets, clock, spot_check(contract, dtype, dict(ASSIGN.spot_sample), args.seed),
                      timing)
    by_key = {c.key: c for c in configs}
    for s in samples:
        m = summarize(s, contract, dims, dtype, device)
        results.append({"config": by_key[s.name].to_json(), "median_ms": m.median_ms, "p10_ms": m.p10_ms,
                        "p90_ms": m.p90_ms, "reps": m.reps, "tflops": m.tflops, "failure": m.failure,
                        "times_ms": list(s.times_ms)})
    return results


def _bound(launch: Any, config: Any) -> Any:
    return lambda x, c, csq: launch(x, c, csq, config=config)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("sweep_triton_assign: no CUDA device; nothing was timed", file=sys.stderr)
        return 2
    import triton
    from cake.verifier.timing import CudaClock

    started = time.perf_counter()
    clock = CudaClock()
    device = clock.device_spec
    if device is None:
        print(f"sweep_triton_assign: {clock.device_name} is not in cake.arch", file=sys.stderr)
        return 2
    arch = ARCHS[device.arch]
    smem_limit = arch.smem_per_block_max_bytes - arch.smem_reserved_per_block_bytes
    provenance = {"device": clock.device_name, "torch": torch.__version__, "triton": triton.__version__,
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "command": "python3 scripts/sweep_triton_assign.py " + " ".join(sys.argv[1:] if argv is None
                                                                                           else argv),
                  "grid": args.grid.to_json(), "reps": args.reps, "max_seconds": args.max_seconds, "seed": args.seed,
                  "protocol": "cake.verifier.timing: interleaved, cold L2, rotated inputs, CUDA events, seeded "
                              "shuffled order, median; fp64 spot check before and after timing"}
    rows: dict[str, dict[str, Any]] = {}
    not_swept: dict[str, str] = {}
    if args.compile_workers > 0:
        jobs = compile_jobs(args.shape_list,
                            lambda shape: enumerate_configs(args.grid, shape.dim_map["D"], shape.dtype, smem_limit)[0])
        provenance["precompile"] = precompile(jobs, args.compile_workers)
        print(f"precompiled {len(jobs)} variants on {args.compile_workers} processes in "
              f"{provenance['precompile']['seconds']:.0f} s", flush=True)
    for shape in args.shape_list:
        key = shape_key_of(shape)
        if time.perf_counter() - started > args.budget_s:
            not_swept[key] = f"{shape.name}: the {args.budget_s:g} s budget was spent before it started"
            continue
        configs, pruned = enumerate_configs(args.grid, shape.dim_map["D"], shape.dtype, smem_limit)
        results = sweep_shape(shape, configs, clock, device, args)
        rows[key] = table_row(shape, results, pruned)
        best = rows[key]["best"]
        print(f"{shape.name} ({key}): best {best} at {rows[key]['best_ms']} ms; {len(configs)} timed, "
              f"{len(pruned)} pruned; {time.perf_counter() - started:.0f} s", flush=True)
        write_table(args.out, {**provenance, "elapsed_s": time.perf_counter() - started}, rows, not_swept)
    write_table(args.out, {**provenance, "elapsed_s": time.perf_counter() - started}, rows, not_swept)
    return 0 if rows and all(r["best"] is not None for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
