"""The per-call host work of an exported CUDA op, on the CPU: the driver replaced at the ctypes boundary.

    python3 scripts/bench_export_host_cpu.py --json OUT.json [--package EXPORT_DIR] [--calls 2000]

Without `--package` it exports `experiments/kmeans/assign_pingpong.cake` (CUDA, sm_90a, D=64; needs nvcc) to a
temporary directory. The package's CUDA call plan for a tiny bf16 assign (B=1 N=256 K=128 D=64) then runs on
CPU tensors with `_cuda`'s driver handle replaced by `CountingDriver` (every driver entry point counts its calls
and returns success), torch's current stream and device stubbed. Per call it reports, for the call plan alone
through the package's dispatcher (`ExportedOp.__call__`: signature, route cache, plan), and through the
out-variant's Python path (`ExportedOp.call_out`: the checks, then the plan into ids and a workspace allocated
once):
- host µs per call (CPU clock, median of batches; CPU tensors, so torch's allocations are the CPU allocator's);
- Python-level function calls per call (cProfile's count: Python functions and C builtins);
- torch tensor allocations per call (torch.empty / full / zeros / empty_like / contiguous copies counted);
- driver calls per call by entry point (launches, memsets, tensor-map encodings).
`--cooperative LAUNCH` marks that launch's code cooperative first (as `kernelgen.LaunchCode.cooperative` would), so
it goes through `cuLaunchKernelEx` with CU_LAUNCH_ATTRIBUTE_COOPERATIVE: the host cost of that path.
What it cannot show: the real driver's cost per `cuLaunchKernel` and torch's CUDA allocator; the H200 script
(`scripts/gpu_host_overhead.py`) measures those.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import ctypes
import json
import pstats
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

TINY = {"B": 1, "N": 256, "K": 128, "D": 64}
SCHEDULE = Path(__file__).resolve().parents[1] / "experiments" / "kmeans" / "assign_pingpong.cake"
PACKAGE = "cake_bench_export_host"
ALLOCATORS = ("empty", "full", "zeros", "empty_like", "zeros_like")
# cuda.h's layouts, read as a driver reads them: CUlaunchConfig (grid, block, smem, pad, stream, attrs, numAttrs)
# and CUlaunchAttribute (id, pad, then the value union, whose first int is `cooperative`), 72 bytes apart
LAUNCH_CONFIG = struct.Struct("<7I4xQQI")
LAUNCH_ATTRIBUTE = struct.Struct("<i4xi")
LAUNCH_ATTRIBUTE_BYTES = 72


class CountingDriver:
    """libcuda at the ctypes boundary: each entry point the runtime calls counts and returns CUDA_SUCCESS."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.launches: list[tuple[Any, ...]] = []
        self.memsets: list[tuple[str, int, int, int, int]] = []
        self.attributes: list[list[tuple[int, int]]] = []  # per cuLaunchKernelEx: its (id, first value int)s

    def cuLaunchKernel(self, function: Any, gx: Any, gy: Any, gz: Any, bx: Any, by: Any, bz: Any, smem: Any,
                       stream: Any, params: Any, extra: Any) -> int:
        self.calls["cuLaunchKernel"] += 1
        self.launches.append((function, (gx, gy, gz), bx, smem, stream))
        return 0

    def cuLaunchKernelEx(self, config: int, function: Any, params: Any, extra: Any) -> int:
        """`config`: the address of a CUlaunchConfig (the ctypes path passes it so), decoded as the driver would."""
        self.calls["cuLaunchKernelEx"] += 1
        gx, gy, gz, bx, _, _, smem, stream, attrs, n = LAUNCH_CONFIG.unpack(ctypes.string_at(config, LAUNCH_CONFIG.size))
        self.launches.append((function, (gx, gy, gz), bx, smem, stream))
        self.attributes.append([LAUNCH_ATTRIBUTE.unpack(ctypes.string_at(attrs + i * LAUNCH_ATTRIBUTE_BYTES,
                                                                         LAUNCH_ATTRIBUTE.size)) for i in range(n)])
        return 0

    def _memset(self, name: str, ptr: int, value: int, count: int, stream: int) -> int:
        self.calls[name] += 1
        self.memsets.append((name, ptr, value, count, stream))
        return 0

    def cuMemsetD32Async(self, ptr: int, value: int, count: int, stream: int) -> int:
        return self._memset("cuMemsetD32Async", ptr, value, count, stream)

    def cuMemsetD16Async(self, ptr: int, value: int, count: int, stream: int) -> int:
        return self._memset("cuMemsetD16Async", ptr, value, count, stream)

    def cuMemsetD8Async(self, ptr: int, value: int, count: int, stream: int) -> int:
        return self._memset("cuMemsetD8Async", ptr, value, count, stream)

    def cuTensorMapEncodeTiled(self, *args: Any) -> int:
        self.calls["cuTensorMapEncodeTiled"] += 1
        return 0

    def cuGetErrorName(self, code: int, name: Any) -> int:
        return 0


@contextmanager
def counting_allocations(counter: collections.Counter[str]) -> Iterator[None]:
    """torch's tensor factories wrapped to count their calls (restored on exit)."""
    saved = {name: getattr(torch, name) for name in ALLOCATORS}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counter[name] += 1
            return fn(*args, **kwargs)
        return counted

    for name, fn in saved.items():
        setattr(torch, name, wrap(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)


def export_pingpong(out: Path) -> Path:
    from cake.export import export_package, from_files

    export_package(from_files([SCHEDULE]), out, name=PACKAGE, backend="cuda", archs=("sm_90a",),
                   static_overrides={"D": [TINY["D"]]})
    return out


def stub_device(pkg: Any, driver: CountingDriver) -> None:
    """The package's CUDA runtime pointed at `driver`, on 'device 0' with 132 SMs and stream 77."""
    cuda = pkg._cuda
    cuda._lib = driver
    cuda.current_stream = lambda index: 77
    if hasattr(cuda, "current_device"):
        cuda.current_device = lambda: 0
    torch.cuda.current_device = lambda: 0  # type: ignore[assignment]
    torch.cuda.get_device_properties = lambda index: type("P", (), {"multi_processor_count": 132})  # type: ignore


def plan_for(pkg: Any, inputs: tuple[torch.Tensor, ...]) -> tuple[Any, Any]:
    """(the call plan of `inputs`, the op) with the cubin load replaced by fake function handles."""
    op = pkg.PACKAGE.ops["kmeans_assign"]
    variant = op.buckets[0][2][0]
    spec = variant.specs[variant.spec_key("bf16", variant.bind(inputs))]
    module = type("Module", (), {"functions": {c["kname"]: 1000 + i for i, c in enumerate(spec["codes"])}})
    variant.module = lambda spec, device: (module, "sm_90a")
    call = variant.route(inputs, "bf16")
    op.routes[pkg._ops.signature(inputs)] = call  # the dispatcher's cache, as a GPU call would have filled it
    return call, op


def mark_cooperative(pkg: Any, launch: str) -> None:
    """The kmeans_assign variant's code of `launch` marked cooperative in every specialization (before a call plan
    is built from it), as the lead's `LaunchCode.cooperative` marks a fused kernel's."""
    variant = pkg.PACKAGE.ops["kmeans_assign"].buckets[0][2][0]
    codes = [code for spec in variant.specs.values() for code in spec["codes"]]
    marked = [code for code in codes if code["launch"] == launch]
    if not marked:
        raise SystemExit(f"--cooperative {launch}: no such launch; the variant has "
                         f"{', '.join(sorted({code['launch'] for code in codes}))}")
    for code in marked:
        code["cooperative"] = True


def aligned_workspace(size: int) -> torch.Tensor:
    """`size` uint8 at a 256-byte aligned address, as the out-variant asks (torch's CPU allocator aligns to 64)."""
    raw = torch.empty(size + 256, dtype=torch.uint8)
    skip = -raw.data_ptr() % 256
    return raw[skip:skip + size]


def measure(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], driver: CountingDriver, calls: int
            ) -> dict[str, Any]:
    batch = 100
    per_call = []
    for _ in range(max(1, calls // batch)):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn(*inputs)
        per_call.append((time.perf_counter() - t0) / batch * 1e6)
    profiler = cProfile.Profile()
    allocations: collections.Counter[str] = collections.Counter()
    driver.calls.clear()
    n = 200
    with counting_allocations(allocations):
        profiler.enable()
        for _ in range(n):
            fn(*inputs)
        profiler.disable()
    stats = pstats.Stats(profiler)
    python_calls = stats.total_calls  # type: ignore[attr-defined]
    return {"host_us_median": statistics.median(per_call), "host_us_min": min(per_call),
            "python_calls_per_call": python_calls / n,
            "allocations_per_call": {k: v / n for k, v in sorted(allocations.items())},
            "driver_calls_per_call": {k: v / n for k, v in sorted(driver.calls.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--package", type=Path, help="an exported CUDA kmeans_assign project (default: export one)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--cooperative", metavar="LAUNCH", help="launch LAUNCH (e.g. assign) cooperatively")
    args = parser.parse_args()
    from cake.export.certify import import_package

    with tempfile.TemporaryDirectory() as tmp:
        root = args.package or export_pingpong(Path(tmp) / "export")
        pkg = import_package(root)
        driver = CountingDriver()
        stub_device(pkg, driver)
        if args.cooperative:
            mark_cooperative(pkg, args.cooperative)
        gen = torch.Generator().manual_seed(0)
        b, n, k, d = (TINY[x] for x in "BNKD")
        inputs = (torch.randn(b, n, d, generator=gen).to(torch.bfloat16),
                  torch.randn(b, k, d, generator=gen).to(torch.bfloat16))
        call, op = plan_for(pkg, inputs)
        call(*inputs)  # first call: templates, tensor maps
        ids = torch.empty(b, n, dtype=torch.int32)
        workspace = aligned_workspace(call.workspace_bytes)
        rows = {"call_plan": measure(call, inputs, driver, args.calls),
                "dispatcher": measure(op, inputs, driver, args.calls),
                "out_variant": measure(lambda *xs: op.call_out(ids, *xs, workspace), inputs, driver, args.calls)}
    result = {"shape": TINY, "cooperative": args.cooperative, "python": sys.version.split()[0], "torch": torch.__version__, "paths": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'path':<12} {'us/call':>8} {'py calls':>9}  allocations/call  driver calls/call")
    for name, row in rows.items():
        allocs = ", ".join(f"{k} {v:g}" for k, v in row["allocations_per_call"].items()) or "-"
        drv = ", ".join(f"{k} {v:g}" for k, v in row["driver_calls_per_call"].items()) or "-"
        print(f"{name:<12} {row['host_us_median']:8.1f} {row['python_calls_per_call']:9.0f}  {allocs}  {drv}")


if __name__ == "__main__":
    main()
