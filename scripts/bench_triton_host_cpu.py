"""The per-call host work of a Triton-lowered op, on the CPU: its `@triton.jit` functions replaced by stubs.

    python3 scripts/bench_triton_host_cpu.py --json OUT.json [--calls 2000] [--table TABLE.json]

The op's update (the bucket table `experiments/kmeans/update_buckets.json` through `load_bucketed`, the callable
`scripts/gpu_update_bench.py` times) runs on CPU tensors at a small shape (B=1 N=4096 K=64 D=128 fp32) with each
launch's `@triton.jit` function swapped for a stub that counts `fn[grid](...)` calls and returns at once. Per call
it reports, with call plans on and off (the generated module's `_K_PLANS_ON`, what CAKE_TRITON_PLANS=0 sets at
import; lowering/triton/module.py, "Call plans"), for the generated launcher alone and through the bench's
callable (BucketedUpdate -> LoadedKernel -> TritonLauncher -> launcher):
- host µs per call (CPU clock, median of batches; CPU tensors, so allocations are the CPU allocator's);
- Python-level function calls per call (cProfile's count: Python functions and C builtins);
- torch allocations per call (torch.empty / torch.full from the generated module) and launches per call.
What it cannot show: Triton's own launch path (`JITFunction.run`: binder, cache key, launcher) and torch's CUDA
allocator, which the stubs remove; the H200 script (`scripts/gpu_update_host.py`) measures those.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

SHAPE = {"B": 1, "N": 4096, "K": 64, "D": 128}
ALLOCATORS = ("empty", "full")


class Stub:
    """Stands in for a `@triton.jit` function: `fn[grid](*args, **kwargs)` counts and returns None."""

    def __init__(self, counts: dict[str, int], name: str):
        self.counts, self.name = counts, name

    def __getitem__(self, grid: object) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.counts[self.name] = self.counts.get(self.name, 0) + 1

        return launch


@contextmanager
def counted_allocations(module_name: str, counts: dict[str, int]) -> Iterator[None]:
    """Count torch.empty / torch.full calls made from the generated module's code."""
    originals = {name: getattr(torch, name) for name in ALLOCATORS}

    def counting(name: str) -> Callable[..., Any]:
        real = originals[name]

        def alloc(*args: Any, **kwargs: Any) -> Any:
            if sys._getframe(1).f_globals.get("__name__") == module_name:
                counts[name] = counts.get(name, 0) + 1
            return real(*args, **kwargs)

        return alloc

    for name in ALLOCATORS:
        setattr(torch, name, counting(name))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)


def per_call_us(call: Callable[[], Any], calls: int, batches: int = 5) -> float:
    call()  # the first call at a signature records its plan
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls // batches):
            call()
        times.append((time.perf_counter() - start) / (calls // batches) * 1e6)
    return statistics.median(times)


def python_calls(call: Callable[[], Any], calls: int = 50) -> float:
    call()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        call()
    profile.disable()
    return pstats.Stats(profile).total_calls / calls  # type: ignore[attr-defined]


def measure(entry: Callable[..., Any], module: Any, inputs: tuple[torch.Tensor, ...], calls: int,
            launches: dict[str, int]) -> dict[str, Any]:
    allocations: dict[str, int] = {}
    entry(*inputs)  # the first call at this signature (it records the plan when plans are on)
    launches.clear()
    with counted_allocations(module.__name__, allocations):
        for _ in range(10):
            entry(*inputs)
    launched = sum(launches.values()) / 10
    return {"us_per_call": per_call_us(lambda: entry(*inputs), calls),
            "python_calls_per_call": python_calls(lambda: entry(*inputs)),
            "allocations_per_call": {k: v / 10 for k, v in sorted(allocations.items())},
            "launches_per_call": launched}


def main(argv: list[str] | None = None) -> int:
    from cake.experiments.kmeans.update_choice import DEFAULT_TABLE, load_bucketed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    args = parser.parse_args(argv)

    update = load_bucketed(str(args.table), backend="triton")
    gen = torch.Generator().manual_seed(0)
    b, n, k, d = SHAPE["B"], SHAPE["N"], SHAPE["K"], SHAPE["D"]
    inputs = (torch.randn(b, n, d, generator=gen), torch.randint(0, k, (b, n), generator=gen), torch.randn(b, k, d))
    bucket = update.table.choose(SHAPE)
    loaded = update.kernel(bucket)
    module: Any = sys.modules[loaded.fn.__module__]  # the generated module (its names are not known to mypy)
    launch_counts: dict[str, int] = {}
    for launch in loaded.lowered.launches:
        setattr(module, launch.function, Stub(launch_counts, launch.function))
    results: dict[str, Any] = {"shape": SHAPE, "bucket": bucket.describe(), "calls": args.calls,
                               "torch": torch.__version__}
    for plans in (False, True):
        module._K_PLANS_ON = plans
        module._k_plans.clear()
        for path, entry in (("launcher", module.__dict__[loaded.lowered.entry]), ("bench_callable", update)):
            results[f"{path}_plans_{'on' if plans else 'off'}"] = measure(entry, module, inputs, args.calls,
                                                                          launch_counts)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'path':<28} {'us/call':>8} {'py calls':>9} {'launches':>9}  allocations")
    for key, row in results.items():
        if isinstance(row, dict) and "us_per_call" in row:
            print(f"{key:<28} {row['us_per_call']:8.1f} {row['python_calls_per_call']:9.0f} "
                  f"{row['launches_per_call']:9.0f}  {row['allocations_per_call']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
