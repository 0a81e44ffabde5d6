"""Cooperative launches on the GPU: which entry point CUDA-graph capture keeps, and the exported op launching one.

    python3 scripts/gpu_coop_launch.py probe --out DIR [--dry-run]
    python3 scripts/gpu_coop_launch.py export --package EXPORT_DIR --out DIR --label NAME [--cooperative LAUNCH]
        [--dry-run]

`probe`: a small kernel whose blocks meet at a grid-wide barrier (`cooperative_groups::this_grid().sync()`, legal
only under a cooperative launch) sums a vector of ones; compiled here with nvcc (sm_90a). It runs through
1. `cuLaunchCooperativeKernel` (cuda.bindings), and
2. `cuLaunchKernelEx` with CU_LAUNCH_ATTRIBUTE_COOPERATIVE, through CAKE's own `launch.CudaModule` (a
   `LaunchCode` with `cooperative=True`: the path the fused kernels take),
each eagerly, captured in a `torch.cuda.CUDAGraph` (torch's capture stream) and replayed (the sum must be right,
also after the input changes in place), captured by the driver's stream capture with the captured kernel node's
cooperative attribute read back, and once with one block more than can be resident (the driver must refuse it
with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: proof the launch is taken as cooperative). Writes `probe.json`.

`export`: the exported kmeans_assign (EXPORT_DIR, `cake export ... --static D=128`) with launch LAUNCH's code
marked cooperative (as the lead's `LaunchCode.cooperative` marks a fused kernel's; none: the plain package) on the
host path `$CAKE_EXPORT_HOST_PATH` chooses: its ids must equal CAKE's own callable's (the same cubin source), a
`torch.cuda.CUDAGraph` capture must replay them (`gpu_export.graph_check`), and the host time per call is measured
(`gpu_export.host_time_us`). Writes `coop_export_NAME.json`.

`--dry-run` (CPU): `probe` writes and compiles the kernel; `export` runs the package's call plan on CPU tensors
with scripts/bench_export_host_cpu.py's counting driver and checks that the marked launch goes through
cuLaunchKernelEx with the cooperative attribute.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

PROBE_SOURCE = r"""
#include <cooperative_groups.h>
struct ProbeArgs { const float* x; float* partial; float* out; int n; };
// The sum of x: each block writes its partial sum, the grid meets at a grid-wide barrier, block 0 adds the
// partials. Only a cooperative launch makes the barrier legal (the whole grid resident at once).
extern "C" __global__ void __launch_bounds__(256) coop_probe(const __grid_constant__ ProbeArgs args) {
  __shared__ float warp_sums[8];
  float s = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < args.n; i += gridDim.x * blockDim.x) s += args.x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float b = 0.f;
    for (int w = 0; w < 8; ++w) b += warp_sums[w];
    args.partial[blockIdx.x] = b;
  }
  cooperative_groups::this_grid().sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float t = 0.f;
    for (unsigned b = 0; b < gridDim.x; ++b) t += args.partial[b];
    *args.out = t;
  }
}
"""
PROBE_KERNEL = "coop_probe"
PROBE_THREADS = 256
PROBE_N = 1 << 20  # ones: every partial and the total are exact in fp32
ARCH = "sm_90a"


def compile_probe(work: Path) -> bytes:
    (work / "probe.cu").write_text(PROBE_SOURCE)
    subprocess.run(["nvcc", f"-arch={ARCH}", "-cubin", "-o", str(work / "probe.cubin"), str(work / "probe.cu")],
                   check=True, timeout=120)
    return (work / "probe.cubin").read_bytes()


def attempt(what: Callable[[], Any]) -> Any:
    """`what()`, or the failure's text: every form is tried even where another one fails (the probe's question)."""
    try:
        return what()
    except (RuntimeError, AssertionError) as error:  # LaunchError, torch's capture errors, a wrong sum
        return f"failed: {type(error).__name__}: {error}"


def probe(dry_run: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = compile_probe(Path(tmp))
    if dry_run:
        return {"dry_run": True, "cubin_bytes": len(cubin)}
    import torch
    from cake.lowering.cuda.kernelgen import LaunchCode
    from cake.lowering.cuda.launch import CudaModule, LaunchError, _check
    from cuda.bindings import driver

    device = torch.cuda.current_device()
    code = LaunchCode("probe", PROBE_KERNEL, PROBE_THREADS, 0, (), 32, True, 0, "", None, cooperative=True)
    module = CudaModule(cubin, [code], device)
    fn = module.functions[PROBE_KERNEL]
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    per_sm = _check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, PROBE_THREADS, 0), "occupancy")
    x = torch.ones(PROBE_N, device="cuda")
    partials = torch.zeros(per_sm * sms + 1, device="cuda")
    total = torch.zeros(1, device="cuda")
    args = struct.pack("<QQQi4x", x.data_ptr(), partials.data_ptr(), total.data_ptr(), PROBE_N)
    block = ctypes.create_string_buffer(args, len(args))
    params = (ctypes.c_void_p * 1)(ctypes.addressof(block))

    def legacy(grid: int, stream: int) -> None:
        _check(driver.cuLaunchCooperativeKernel(fn, grid, 1, 1, PROBE_THREADS, 1, 1, 0, driver.CUstream(stream),
                                                ctypes.addressof(params)), f"cuLaunchCooperativeKernel grid={grid}")

    def ex(grid: int, stream: int) -> None:
        module.launch(code, (grid, 1, 1), args, stream)

    def summed(launch: Callable[[int, int], None], grid: int) -> float:
        total.zero_()
        launch(grid, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        return float(total.item())

    def torch_graph(launch: Callable[[int, int], None]) -> dict[str, Any]:
        x.fill_(1.0)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            launch(sms, torch.cuda.current_stream().cuda_stream)
        total.zero_()
        graph.replay()
        torch.cuda.synchronize()
        first = float(total.item())
        x.fill_(2.0)
        graph.replay()
        torch.cuda.synchronize()
        second = float(total.item())
        x.fill_(1.0)
        return {"replay": first, "after_input_change": second, "ok": first == PROBE_N and second == 2 * PROBE_N}

    def driver_capture(launch: Callable[[int, int], None]) -> dict[str, Any]:
        stream = torch.cuda.Stream()
        handle = stream.cuda_stream
        _check(driver.cuStreamBeginCapture(driver.CUstream(handle),
                                           driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "cuStreamBeginCapture")
        try:
            launch(sms, handle)
        finally:
            graph = _check(driver.cuStreamEndCapture(driver.CUstream(handle)), "cuStreamEndCapture")
        _, count = _check(driver.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
        nodes, _ = _check(driver.cuGraphGetNodes(graph, count), "cuGraphGetNodes")
        # CUkernelNodeAttrID by value (2 = cooperative): its member's name differs between cuda-bindings 12 and 13
        value = _check(driver.cuGraphKernelNodeGetAttribute(nodes[0], driver.CUkernelNodeAttrID(2)),
                       "cuGraphKernelNodeGetAttribute")
        _check(driver.cuGraphDestroy(graph), "cuGraphDestroy")
        return {"nodes": int(count), "node_cooperative": int(value.cooperative)}

    def too_large(launch: Callable[[int, int], None]) -> str:
        try:
            summed(launch, per_sm * sms + 1)
        except LaunchError as error:
            return "refused: COOPERATIVE_LAUNCH_TOO_LARGE" if "COOPERATIVE_LAUNCH_TOO_LARGE" in str(error) else \
                f"refused otherwise: {error}"
        return "accepted (the launch was not taken as cooperative)"

    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "driver": _check(driver.cuDriverGetVersion(),
                              "cuDriverGetVersion"), "torch": torch.__version__, "sms": sms, "blocks_per_sm": per_sm,
                              "n": PROBE_N, "forms": {}}
    forms = {"cuLaunchKernelEx+COOPERATIVE (CudaModule)": ex, "cuLaunchCooperativeKernel": legacy}
    for name, launch in forms.items():
        row = result["forms"][name] = {"eager_sum": attempt(partial(summed, launch, sms)),
                                       "torch_graph": attempt(partial(torch_graph, launch)),
                                       "driver_capture": attempt(partial(driver_capture, launch))}
        print(name, json.dumps(row), flush=True)
    # last: were a form not taken as cooperative, the oversized grid's barrier could hang (the stage's limit ends it)
    for name, launch in forms.items():
        result["forms"][name]["one_block_too_many"] = attempt(partial(too_large, launch))
        print(name, "one block too many:", result["forms"][name]["one_block_too_many"], flush=True)
    return result


# ------------------------------------------------------------------------------------------- the exported op

def mark_cooperative(pkg: Any, launch: str) -> int:
    """Every code of launch `launch` in the package's kmeans_assign variants marked cooperative (before a call plan
    is built); how many."""
    marked = 0
    for _, _, variants in pkg.PACKAGE.ops["kmeans_assign"].buckets:
        for variant in variants:
            for spec in getattr(variant, "specs", {}).values():
                for code in spec["codes"]:
                    if code["launch"] == launch:
                        code["cooperative"] = True
                        marked += 1
    if not marked:
        raise SystemExit(f"--cooperative {launch}: no kmeans_assign variant has a launch of that name")
    return marked


def export_dry_run(pkg: Any, launch: str | None) -> dict[str, Any]:
    import bench_export_host_cpu as bench
    import torch

    driver = bench.CountingDriver()
    bench.stub_device(pkg, driver)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 256, 128, generator=gen).bfloat16()
    c = torch.randn(1, 128, 128, generator=gen).bfloat16()
    call, _ = bench.plan_for(pkg, (x, c))
    call(x, c)
    expected = {"cuLaunchKernelEx": 1} if launch else {}
    plain = len(call.launches) - (1 if launch else 0)
    expected |= {"cuLaunchKernel": plain} if plain else {}
    launches = {k: v for k, v in driver.calls.items() if k.startswith("cuLaunch")}
    assert launches == expected, (launches, expected)
    assert driver.attributes == ([[(2, 1)]] if launch else []), driver.attributes
    return {"dry_run": True, "driver_calls": dict(driver.calls), "attributes": driver.attributes}


def export(package: Path, launch: str | None, label: str, dry_run: bool) -> dict[str, Any]:
    from cake.export.certify import import_package

    pkg = import_package(package)
    result: dict[str, Any] = {"label": label, "cooperative": launch, "host_path": pkg.host_path,
                              "marked": mark_cooperative(pkg, launch) if launch else 0}
    if dry_run:
        return result | export_dry_run(pkg, launch)
    import gpu_export
    import torch
    from cake.experiments.schedules import load_schedule_file

    exported = getattr(torch.ops, pkg.namespace).kmeans_assign
    before = load_schedule_file(Path("experiments/kmeans/assign_pingpong.cake"), backend="cuda")
    cooperative_calls = [0]
    if launch and pkg.host_path["kind"] == "ctypes":  # count the entry point the ctypes path takes
        real = pkg._cuda.launch_cooperative

        def counted(*args: Any) -> int:
            cooperative_calls[0] += 1
            return int(real(*args))

        pkg._cuda.launch_cooperative = counted
    for dims in (gpu_export.TINY, gpu_export.GRAPH):
        x, c = gpu_export.kmeans_inputs(dims, "cuda")
        for _ in range(3):  # the first call plans (and installs the C++ plan); the later ones take the fast path
            ids = exported(x, c)
        result.setdefault("ids_equal_cake", {})[str(dims)] = bool(torch.equal(ids, before(x, c)))
    if cooperative_calls[0]:
        pkg._cuda.launch_cooperative = real  # the host time below without the counter
    x, c = gpu_export.kmeans_inputs(gpu_export.TINY, "cuda")
    result["host_us"] = gpu_export.host_time_us(exported, (x, c), torch.cuda.synchronize)
    result["graph"] = gpu_export.graph_check(exported, gpu_export.GRAPH)
    result["cooperative_calls_ctypes"] = cooperative_calls[0]
    result["launcher_stats"] = pkg.launcher_stats() if hasattr(pkg, "launcher_stats") else None
    call = next(iter(pkg.PACKAGE.ops["kmeans_assign"].routes.values()), None)
    result["launch_flags"] = [launch_plan.cooperative for launch_plan in call.launches] if call is not None and \
        hasattr(call, "launches") else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dry-run", action="store_true")
    e = sub.add_parser("export")
    e.add_argument("--package", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--label", required=True)
    e.add_argument("--cooperative", metavar="LAUNCH", help="mark launch LAUNCH (e.g. assign) cooperative")
    e.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.mode == "probe":
        result, name = probe(args.dry_run), "probe.json"
    else:
        result, name = export(args.package, args.cooperative, args.label, args.dry_run), f"coop_export_{args.label}.json"
    (args.out / name).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_export_host_cpu, gpu_export
    main()
