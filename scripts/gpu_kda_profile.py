"""Where a KDA schedule's time goes: each launch's device time (torch.profiler) beside fla's `chunk_kda` at the
same inputs, and each compiled Triton kernel's registers, spills and shared memory. Writes JSON, prints a table:

    python3 scripts/gpu_kda_profile.py --out OUT.json [--schedule FILE.cake] [--params JSON [JSON ...]]
        [--shapes h96_fixed ...]

Several `--params` objects profile several variants of the schedule in one process, on the same inputs and
beside the same fla calls (each variant costs its compile and five calls): a cheap way to rank tile sizes and
warps on the GPU before spending a benchmark on one.

No verdict is consulted: this is a diagnosis, not a timing result (`scripts/gpu_kda_bench.py` is the benchmark).
Inputs are the benchmark's (`gpu_kda_bench.shape_inputs`); each contestant is called twice to compile and warm,
then three times under the profiler. `--dry-run` lowers the schedule and lists what it would profile (CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gpu_kda_bench import SEED_SCHEDULE, shape_inputs

PROFILED_CALLS = 3


def profile_calls(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Device time per kernel name, averaged over PROFILED_CALLS calls, slowest first."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):
        fn(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED_CALLS):
            fn(*inputs)
        torch.cuda.synchronize()
    per_kernel: dict[str, list[float]] = defaultdict(list)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[event.name].append(event.device_time_total / 1000.0)
    rows = [{"kernel": name, "ms_per_call": sum(ts) / PROFILED_CALLS, "launches_per_call": len(ts) / PROFILED_CALLS}
            for name, ts in per_kernel.items()]
    return sorted(rows, key=lambda r: -r["ms_per_call"])


def variant_name(stem: str, params: str | None) -> str:
    """A contestant's name: the schedule's stem, with the params it binds when it binds any."""
    return stem if params is None else f"{stem} {params}"


def triton_kernel_resources() -> list[dict[str, Any]]:
    """Registers, spills and shared memory of every Triton kernel compiled in this process."""
    rows = []
    for fn in _jit_functions():
        for device_cache in getattr(fn, "device_caches", {}).values():
            kernels = device_cache[0] if isinstance(device_cache, tuple) else device_cache
            for compiled in kernels.values():
                meta = compiled.metadata
                rows.append({"kernel": fn.__name__, "n_regs": getattr(compiled, "n_regs", None),
                             "n_spills": getattr(compiled, "n_spills", None), "shared": getattr(meta, "shared", None),
                             "num_warps": getattr(meta, "num_warps", None), "num_stages": getattr(meta, "num_stages", None)})
    return rows


def _jit_functions() -> list[Any]:
    import gc

    from triton.runtime.jit import JITFunction

    return [obj for obj in gc.get_objects() if isinstance(obj, JITFunction)]


def main(argv: list[str] | None = None) -> int:
    from cake.experiments.kda import shapes as kda_shapes

    parser = argparse.ArgumentParser(prog="scripts/gpu_kda_profile.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--schedule", type=Path, default=SEED_SCHEDULE)
    parser.add_argument("--params", nargs="+", default=[None], metavar="JSON",
                        help="JSON object(s) binding the schedule's params, one variant each (default: their defaults)")
    parser.add_argument("--shapes", nargs="+", default=["h96_fixed"], choices=[s.name for s in kda_shapes.GPU_SHAPES])
    parser.add_argument("--no-fla", action="store_true", help="profile the schedule only")
    parser.add_argument("--dry-run", action="store_true", help="lower and list, profile nothing (runs on a CPU)")
    args = parser.parse_args(argv)

    from cake.experiments.kda.adapt import load_schedule
    from cake.experiments.kda.baselines import FLA_CHUNK

    contestants: dict[str, Callable[..., Any]] = {
        variant_name(args.schedule.stem, params): load_schedule(args.schedule, params=params) for params in args.params}
    if not args.no_fla and not args.dry_run:
        contestants[FLA_CHUNK.name] = FLA_CHUNK.load().run
    by_name = {s.name: s for s in kda_shapes.GPU_SHAPES}
    if args.dry_run:
        print(f"dry run: would profile {list(contestants)} at {args.shapes}")
        return 0
    report: dict[str, Any] = {"schedule": str(args.schedule), "params": args.params,
                              "device": torch.cuda.get_device_name(), "shapes": {}}
    for shape_name in args.shapes:
        inputs = shape_inputs(by_name[shape_name], "cuda", seed=0)
        report["shapes"][shape_name] = {}
        for name, fn in contestants.items():
            rows = profile_calls(fn, inputs)
            report["shapes"][shape_name][name] = rows
            total = sum(r["ms_per_call"] for r in rows)
            print(f"== {shape_name} {name}: {total:.3f} ms of kernels per call")
            for r in rows[:12]:
                print(f"  {r['ms_per_call']:9.3f} ms  x{r['launches_per_call']:<5.1f} {r['kernel'][:90]}")
    args.out.write_text(json.dumps(report, indent=2) + "\n")  # kept if reading Triton's caches below fails
    report["triton_kernels"] = triton_kernel_resources()
    for r in report["triton_kernels"]:
        print(f"  {r['kernel'][:40]:40} regs {r['n_regs']} spills {r['n_spills']} smem {r['shared']} "
              f"warps {r['num_warps']} stages {r['num_stages']}")
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
