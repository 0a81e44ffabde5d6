"""The C++ host path of exported CUDA ops (`runtime/_launcher.cpp`) and the choice between it and ctypes.

The launcher is compiled here with the CPU torch's headers and CUDA's cuda.h (slow: one C++ build of torch
headers), loaded, attached to an exported op and fed the plan the Python path writes: the two sides agree on
the plan format (the C++ parser refuses trailing or missing values, out-of-block offsets, a wrong format).
Running it needs a GPU: scripts/gpu_host_overhead.py (scripts/gpu/s4_launcher.sh) does that on the H200.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from cake.lowering.cuda.compile import find_nvcc

from cake.export.runtime import _launcher

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_choice_is_validated_and_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_launcher.HOST_PATH_ENV, "fast")
    with pytest.raises(ImportError, match="CAKE_EXPORT_HOST_PATH='fast': use one of auto, cpp, ctypes"):
        _launcher.select("pkg")
    monkeypatch.setenv(_launcher.HOST_PATH_ENV, "ctypes")
    assert _launcher.select("pkg") == (None, {"kind": "ctypes", "why": "chosen by CAKE_EXPORT_HOST_PATH=ctypes"})


def test_auto_without_a_compiler_warns_and_records_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_launcher.HOST_PATH_ENV, raising=False)
    monkeypatch.setattr(_launcher, "compiler", lambda: None)
    # as a process that has not loaded the launcher yet (another test in this worker may have: then it needs no
    # compiler, rightly)
    monkeypatch.setattr(_launcher, "NAMESPACE", "cake_launcher_never_loaded")
    monkeypatch.setattr(torch.version, "cuda", "12.8")  # as a CUDA torch: the C++ path would be wanted
    with pytest.warns(_launcher.HostPathWarning, match=r"pkg: CUDA ops take the ctypes host path .*no C\+\+ compiler"):
        ops, record = _launcher.select("pkg")
    assert ops is None and record == {"kind": "ctypes", "why": "no C++ compiler (set $CXX or install g++)"}
    monkeypatch.setenv(_launcher.HOST_PATH_ENV, "cpp")
    with pytest.raises(ImportError, match=r"CAKE_EXPORT_HOST_PATH=cpp, but the C\+\+ launcher is unavailable: no C\+\+"):
        _launcher.select("pkg")


def test_cpu_torch_takes_ctypes_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_launcher.HOST_PATH_ENV, raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CUDA op can run: nothing to warn about
        ops, record = _launcher.select("pkg")
    assert ops is None and record["kind"] == "ctypes" and "has no CUDA" in record["why"]


def test_compile_command_uses_torch_headers_and_abi(tmp_path: Path) -> None:
    cmd = _launcher.compile_command("c++", tmp_path, tmp_path / "x.so")
    torch_root = Path(torch.__file__).resolve().parent
    assert f"-I{torch_root / 'include'}" in cmd and f"-I{tmp_path}" in cmd and "-std=c++20" in cmd
    assert f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}" in cmd
    assert "-lc10" in cmd and "-ltorch_cpu" in cmd
    has_c10_cuda = any((torch_root / "lib").glob("libc10_cuda.*"))
    assert ("-lc10_cuda" in cmd) == has_c10_cuda  # never libcudart or libcuda: the driver is opened at run time


LAYOUT_PROBE = r"""
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>
int main(void) {
  printf("%zu %zu %zu %zu %zu %zu %d\n", sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value),
         sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, hStream), offsetof(CUlaunchConfig, attrs),
         offsetof(CUlaunchConfig, numAttrs), (int)CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  return 0;
}
"""


def test_the_ctypes_launch_config_is_cuda_h_s(tmp_path: Path) -> None:
    """The ctypes path's CUlaunchConfig / CUlaunchAttribute (what cuLaunchKernelEx reads for a cooperative launch)
    have cuda.h's sizes and offsets, and the attribute id is cuda.h's."""
    from cake.export.runtime import _cuda

    include, cxx = _launcher.cuda_include(), _launcher.compiler()
    if include is None or cxx is None:
        pytest.skip("needs CUDA's cuda.h and a C++ compiler")
    (tmp_path / "probe.cpp").write_text(LAYOUT_PROBE)
    subprocess.run([cxx, f"-I{include}", str(tmp_path / "probe.cpp"), "-o", str(tmp_path / "probe")], check=True,
                   timeout=120)
    probe = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True, timeout=60)
    ours = [ctypes.sizeof(_cuda.LaunchAttribute), _cuda.LaunchAttribute.value.offset, ctypes.sizeof(_cuda.LaunchConfig),
            _cuda.LaunchConfig.hStream.offset, _cuda.LaunchConfig.attrs.offset, _cuda.LaunchConfig.numAttrs.offset,
            _cuda.LAUNCH_ATTRIBUTE_COOPERATIVE]
    assert [int(v) for v in probe.stdout.split()] == ours


CHECK = """
import json, sys, torch
sys.path.insert(0, sys.argv[2])
import bench_export_host_cpu as bench
from pathlib import Path
from cake.export.certify import import_package
root = Path(sys.argv[1])
bench.export_pingpong(root)
pkg = import_package(root)
ops = getattr(torch.ops, pkg.namespace)
driver = bench.CountingDriver()
bench.stub_device(pkg, driver)
gen = torch.Generator().manual_seed(0)
x = torch.randn(1, 256, 64, generator=gen).bfloat16()
c = torch.randn(1, 128, 64, generator=gen).bfloat16()
call, op = bench.plan_for(pkg, (x, c))
call(x, c)
plan = call.plan_values()
op.launcher.install(op.table, [x, c], plan)
op.launcher.install(op.table, [x, c], plan)  # the same signature again: kept once
refusals = []
flag_at = plan.index(call.launches[0].function) + 6  # a launch: function, grid x3, threads, smem, cooperative
bad_flag = list(plan)
bad_flag[flag_at] = 2
for bad in (plan + [0], plan[:-1], [99] + plan[1:], bad_flag):
    try:
        op.launcher.install(op.table, [x, c], bad)
    except RuntimeError as error:
        refusals.append(str(error).splitlines()[0])
layout = op.launcher_layout((x, c))
# K = 130: the ||c||^2 rows padded (the memset kept), installed with every scratch buffer allocated on its own
x2, c2 = x, torch.randn(1, 130, 64, generator=gen).bfloat16()
call2, _ = bench.plan_for(pkg, (x2, c2))
call2(x2, c2)
import os
os.environ["CAKE_LAUNCHER_SEPARATE_SCRATCH"] = "1"
op.launcher.install(op.table, [x2, c2], call2.plan_values())
separate = op.launcher_layout((x2, c2))
# N = 512 with the assign launch cooperative (as a fused kernel's): its plan carries the flag and installs
bench.mark_cooperative(pkg, "assign")
x3 = torch.randn(1, 512, 64, generator=gen).bfloat16()
call3, _ = bench.plan_for(pkg, (x3, c))
call3(x3, c)
plan3 = call3.plan_values()
op.launcher.install(op.table, [x3, c], plan3)
flags3 = [plan3[plan3.index(launch.function) + 6] for launch in call3.launches]
same = torch.equal(ops.kmeans_assign(x, c), ops.kmeans_assign_reference(x, c))  # CPU: the CPU implementation
torch.library.opcheck(ops.kmeans_assign.default, (x, c))
# The out kernel's checks, on the plan installed for these CPU inputs, against the Python path's (same words)
def aligned(n):
    raw = torch.empty(n + 256, dtype=torch.uint8)
    skip = -raw.data_ptr() % 256
    return raw[skip:skip + n]
ids = torch.empty(1, 256, dtype=torch.int32)
ws = aligned(call.workspace_bytes)
big = aligned(2048)
bad_args = {
    "dtype": ([ids.float()], ws), "shape": ([ids[:, :255]], ws),
    "strides": ([torch.empty(1, 512, dtype=torch.int32)[:, ::2]], ws), "device": ([ids.to("meta")], ws),
    "alias": ([x.view(-1).view(torch.int32)[:256].view(1, 256)], ws), "no workspace": ([ids], None),
    "small": ([ids], aligned(256)), "unaligned": ([ids], aligned(1024)[16:]),
    "workspace dtype": ([ids], ws.view(torch.int32)), "in workspace": ([big.view(torch.int32)[:256].view(1, 256)], big),
}
checks = {}
for case, (outs, workspace) in bad_args.items():
    seen = []
    for check in (lambda: op.launcher.check_out(op.table, outs, [x, c], workspace),
                  lambda: op.call_out(*outs, x, c, workspace)):
        try:
            check()
            seen.append("accepted")
        except (TypeError, ValueError) as error:
            seen.append(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    checks[case] = seen
good = int(op.launcher.check_out(op.table, [ids], [x, c], ws))
unplanned_check = int(op.launcher.check_out(op.table, [ids[:, :7]], [x[:, :7], c], ws))
out_schema = str(ops.kmeans_assign_out.default._schema)
print(json.dumps({"host_path": pkg.host_path, "stats": pkg.launcher_stats(), "refusals": refusals, "same": same,
                  "checks": checks, "good": good, "unplanned_check": unplanned_check, "out_schema": out_schema,
                  "workspace": op.launcher_workspace((x, c)), "python_workspace": [call.workspace_bytes,
                  list(call.workspace_offsets)], "workspace2": op.launcher_workspace((x2, c2)),
                  "python_workspace2": [call2.workspace_bytes, list(call2.workspace_offsets)],
                  "out_autograd_cuda": torch._C._dispatch_has_kernel_for_dispatch_key(
                      f"{pkg.namespace}::kmeans_assign_out", "AutogradCUDA"),
                  "route": hasattr(ops, "kmeans_assign_route"), "plan_len": len(plan), "layout": layout,
                  "separate": separate, "flags": [plan[flag_at], *flags3], "unplanned": op.launcher_layout((x[:, :7], c)),
                  "bypassed": op.autograd_bypassed, "autograd_cuda": torch._C._dispatch_has_kernel_for_dispatch_key(
                      f"{pkg.namespace}::kmeans_assign", "AutogradCUDA")}))
"""


@pytest.mark.slow
def test_launcher_builds_attaches_and_reads_the_python_plan(tmp_path: Path) -> None:
    if find_nvcc() is None or _launcher.cuda_include() is None or _launcher.compiler() is None:
        pytest.skip("needs nvcc (export), CUDA's cuda.h and a C++ compiler")
    env = {**os.environ, _launcher.HOST_PATH_ENV: "cpp", _launcher.CACHE_ENV: str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "export"), str(SCRIPTS)], capture_output=True,
                          text=True, env=env, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["host_path"] == {"kind": "cpp", "why": "C++ launcher (CAKE_EXPORT_HOST_PATH=cpp)"}
    assert result["route"] and result["same"]
    assert result["stats"] == {"kmeans_assign": {"launched": 0, "routed": 0, "plans": 3, "out_launched": 0,
                                                 "out_routed": 0}}
    assert result["out_schema"].endswith("kmeans_assign_out(Tensor(a!) ids, Tensor x, Tensor c, Tensor(b!)? "
                                         "workspace=None) -> ()")
    # the C++ out kernel refuses what the Python path refuses, with the same type and words
    for case, (cpp, python) in result["checks"].items():
        assert cpp == python and cpp != "accepted", (case, cpp, python)
    assert result["checks"]["small"][0] == ("ValueError: kmeans_assign_out: `workspace` holds 256 bytes, these "
                                            "inputs need 512 (cake_bench_export_host.workspace_bytes("
                                            "'kmeans_assign', *inputs))")
    assert result["checks"]["dtype"][0] == "TypeError: kmeans_assign_out: `ids` must be torch.int32, got torch.float32"
    assert result["good"] == 1 and result["unplanned_check"] == 0  # no plan: a call would go to the Python route
    # the workspace layout (scratch at 256-byte boundaries from 0) is the same on both host paths
    assert result["workspace"] == {"workspace_bytes": 512, "scratch_offsets": [0]}
    assert result["python_workspace"] == [512, [0]]
    assert result["workspace2"] == {"workspace_bytes": result["python_workspace2"][0],
                                    "scratch_offsets": result["python_workspace2"][1]}
    assert result["out_autograd_cuda"]  # integer ids: the out kernel runs at AutogradCUDA too
    # one allocation a call: ids (1 x 256 int32, 1024 bytes), then ||c||^2 (1 x 128 f32) at the next 256 bytes
    assert result["layout"] == {"allocations": 1, "block_bytes": 1024 + 512, "first_output_holds_scratch": True,
                                "scratch_offsets": [1024]}
    assert result["separate"] == {"allocations": 2, "block_bytes": 0, "first_output_holds_scratch": False,
                                  "scratch_offsets": []}
    assert result["unplanned"] == {}
    # integer ids: the launcher also runs at AutogradCUDA, so a call skips autograd's not-implemented fallback
    assert result["bypassed"] and result["autograd_cuda"]
    assert result["refusals"] == ["cake launcher: 1 values after the plan",
                                  f"cake launcher: plan ends early ({result['plan_len'] - 1} values)",
                                  "cake launcher: plan format differs from 3 (the package's _launcher.py and "
                                  "_launcher.cpp disagree)", "cake launcher: cooperative flag 2"]
    # the plain norms and assign launches, then the cooperative assign's plan: (norms 0, assign 1)
    assert result["flags"] == [0, 0, 1]
    built = list((tmp_path / "cache").glob("cake_launcher_*.so"))
    assert len(built) == 1
    assert _launcher.build(tmp_path / "cache") == built[0]  # cached: no second build


def test_the_resident_clusters_come_from_the_driver_with_the_kernels_own_cluster_dims(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An exported persistent clustered launch is sized by cuOccupancyMaxActiveClusters (as the backend's own), asked
    # with no cluster attribute (the kernel's __cluster_dims__ apply); a refusal or no cluster fitting is an error.
    from cake.export.runtime import _cuda

    asked: list[tuple[int, int, int, int, int]] = []

    class Driver:
        clusters, result = 30, 0

        def cuOccupancyMaxActiveClusters(self, count: object, function: int, config: int) -> int:
            c = _cuda.LaunchConfig.from_address(config)
            asked.append((function, c.gridDimX, c.blockDimX, c.sharedMemBytes, c.numAttrs))
            count._obj.value = self.clusters  # type: ignore[attr-defined]  # ctypes.byref's object
            return self.result

    driver = Driver()
    monkeypatch.setattr(_cuda, "_lib", driver)
    assert _cuda.max_active_clusters(0xBEEF, 4, 384, 200_000) == 30
    assert asked == [(0xBEEF, 4, 384, 200_000, 0)]
    driver.clusters = 0
    with pytest.raises(RuntimeError, match="0 clusters of 4 CTAs"):
        _cuda.max_active_clusters(0xBEEF, 4, 384, 200_000)
