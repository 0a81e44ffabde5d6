"""The per-call host work of a Triton-lowered op, on the CPU: Triton's JIT path up to its launcher, without a GPU.

    python3 scripts/bench_triton_host_cpu.py --json OUT.json [--calls 2000] [--table TABLE.json]   # no TRITON_INTERPRET

The op's update (the bucket table `experiments/kmeans/update_buckets.json` through `load_bucketed`, the callable
`scripts/gpu_update_bench.py` times) runs on CPU tensors at a small shape (B=1 N=4096 K=64 D=128 fp32), call plans
off and on (the generated module's `_K_PLANS_ON`, what CAKE_TRITON_PLANS=0 sets at import; lowering/triton/
module.py, "Call plans"), for the generated launcher alone, the launcher given its output and workspace
(`launcher_out`: `out=`, `workspace=`, as an exported out-variant calls it; module.py, "Outputs and workspace"),
and through the bench's callable (BucketedUpdate -> LoadedKernel -> TritonLauncher -> launcher), two ways:
- `stubbed`: each launch's `@triton.jit` function swapped for a stub that counts `fn[grid](...)` and returns:
  host µs per call, Python-level function calls per call (cProfile), torch allocations and launches per call;
- `jit`: the real `JITFunction`s with Triton's driver replaced by one that names an sm_90 target and a compile
  that returns a `CompiledKernel` whose launcher does nothing: Triton's whole Python launch path (binder, cache
  key, launch metadata, `CompiledKernel[grid]`) runs as on the H200, so plans off time the JIT path and plans on
  the direct replay; only the C launcher's argument packing and the driver's launch are missing (the same in both).
What it cannot show: the driver's launch cost and torch's CUDA allocator; the H200 script
(`scripts/gpu_update_host.py`) measures those. CPU tensors: allocations are the CPU allocator's (a fill is a memset).
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


def jit_rig(module: Any, launches: Any) -> None:
    """Real JIT functions, a fake sm_90 driver and a no-op compiled kernel per specialization (module docstring)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import CompiledKernel
    from triton.runtime import driver

    class FakeDriver:
        def get_current_target(self) -> Any:
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int) -> int:
            return 0

    class NoLaunch(CompiledKernel):
        def __init__(self) -> None:
            self.function, self.packed_metadata, self.src, self.name = None, None, None, "no_launch"

        def __del__(self) -> None:
            pass

        def _init_handles(self) -> None:
            pass

        @property
        def run(self) -> Callable[..., None]:  # type: ignore[override]
            return lambda *args: None

    driver.set_active(FakeDriver())
    for launch in launches:
        fn = getattr(module, launch.function)
        if not isinstance(fn, triton.runtime.JITFunction):
            raise SystemExit("bench_triton_host_cpu: the kernels are interpreted; run without TRITON_INTERPRET")

        def compile_nothing(key: Any, signature: Any, device: Any, constexprs: Any, options: Any, attrs: Any,
                            warmup: Any, fn: Any = fn) -> Any:
            return fn.device_caches[device][0].setdefault(key, NoLaunch())

        fn._do_compile = compile_nothing
    module._k_stream = lambda: 0


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
            launches: dict[str, int], given: dict[str, Any] | None = None) -> dict[str, Any]:
    """`given`: the launcher's `out=` and `workspace=` (the `launcher_out` path), else None."""
    allocations: dict[str, int] = {}
    extra = given or {}
    entry(*inputs, **extra)  # the first call at this signature (it records the plan when plans are on)
    launches.clear()
    with counted_allocations(module.__name__, allocations):
        for _ in range(10):
            entry(*inputs, **extra)
    launched = sum(launches.values()) / 10
    return {"us_per_call": per_call_us(lambda: entry(*inputs, **extra), calls),
            "python_calls_per_call": python_calls(lambda: entry(*inputs, **extra)),
            "allocations_per_call": {k: v / 10 for k, v in sorted(allocations.items())},
            "launches_per_call": launched}


def main(argv: list[str] | None = None) -> int:
    from cake.experiments.kmeans.update_choice import DEFAULT_TABLE, load_bucketed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    args = parser.parse_args(argv)

    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise SystemExit("bench_triton_host_cpu: unset TRITON_INTERPRET (the jit mode needs Triton's JIT functions)")
    update = load_bucketed(str(args.table), backend="triton")
    gen = torch.Generator().manual_seed(0)
    b, n, k, d = SHAPE["B"], SHAPE["N"], SHAPE["K"], SHAPE["D"]
    inputs = (torch.randn(b, n, d, generator=gen), torch.randint(0, k, (b, n), generator=gen), torch.randn(b, k, d))
    bucket = update.table.choose(SHAPE)
    loaded = update.kernel(bucket)
    module: Any = sys.modules[loaded.fn.__module__]  # the generated module (its names are not known to mypy)
    results: dict[str, Any] = {"shape": SHAPE, "bucket": bucket.describe(), "calls": args.calls,
                               "torch": torch.__version__}
    jit_rig(module, loaded.lowered.launches)
    originals = {launch.function: getattr(module, launch.function) for launch in loaded.lowered.launches}
    launch_counts: dict[str, int] = {}
    for mode in ("jit", "stubbed"):
        for name, fn in originals.items():
            setattr(module, name, fn if mode == "jit" else Stub(launch_counts, name))
        for plans in (False, True):
            module._K_PLANS_ON = plans
            module._k_plans.clear()
            launcher = module.__dict__[loaded.lowered.entry]
            given = {"out": torch.empty(b, k, d), "workspace": torch.empty(launcher.workspace_bytes(*inputs),
                                                                           dtype=torch.uint8)}
            for path, entry, extra in (("launcher", launcher, None), ("launcher_out", launcher, given),
                                       ("bench_callable", update, None)):
                row = measure(entry, module, inputs, args.calls, launch_counts, extra)
                row["direct"] = bool(plans and all(p.direct for p in module._k_plans.values()))
                if mode == "jit":
                    row["launches_per_call"] = None  # counted by the stubs only
                results[f"{mode}_{path}_plans_{'on' if plans else 'off'}"] = row
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'mode / path / plans':<34} {'us/call':>8} {'py calls':>9} {'launches':>9} {'direct':>6}  allocations")
    for key, row in results.items():
        if isinstance(row, dict) and "us_per_call" in row:
            print(f"{key:<34} {row['us_per_call']:8.1f} {row['python_calls_per_call']:9.0f} "
                  f"{row['launches_per_call'] or '-':>9} {row['direct']!s:>6}  {row['allocations_per_call']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
