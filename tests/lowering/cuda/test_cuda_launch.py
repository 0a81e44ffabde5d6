"""`launch.CudaModule.launch` with cuda.bindings' driver replaced by a recording fake (CPU only): a plain code goes
through cuLaunchKernel, a cooperative one through cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_COOPERATIVE (the
capturable form, see launch.py), and a failed launch names its entry point."""

from __future__ import annotations

import dataclasses
import enum
from types import SimpleNamespace
from typing import Any

import pytest
from cake.lowering.cuda import launch
from cake.lowering.cuda.kernelgen import LaunchCode

COOPERATIVE_TOO_LARGE = 720  # CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE


class CUlaunchAttributeID(enum.IntEnum):
    CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2


class FakeDriver:
    """The part of `cuda.bindings.driver` that CudaModule touches; launches are recorded, results scripted."""

    CUresult = SimpleNamespace(CUDA_SUCCESS=0)
    CUfunction_attribute = SimpleNamespace(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)
    CUlaunchAttributeID = CUlaunchAttributeID

    def __init__(self, result: int = 0) -> None:
        self.result = result
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    # value types: plain records, as the bindings' structs hold their fields
    def CUstream(self, handle: int) -> int:
        return handle

    def CUlaunchAttribute(self) -> Any:
        return SimpleNamespace(id=None, value=SimpleNamespace(cooperative=0))

    def CUlaunchConfig(self) -> Any:
        return SimpleNamespace()

    def cuModuleLoadData(self, cubin: bytes) -> tuple[int, int]:
        return 0, 1

    def cuModuleGetFunction(self, module: int, name: bytes) -> tuple[int, str]:
        return 0, name.decode()

    def cuFuncSetAttribute(self, fn: str, attr: int, value: int) -> tuple[int]:
        return (0,)

    def cuLaunchKernel(self, fn: str, *args: Any) -> tuple[int]:
        self.calls.append(("cuLaunchKernel", (fn, *args)))
        return (self.result,)

    def cuLaunchKernelEx(self, config: Any, fn: str, params: int, extra: int) -> tuple[int]:
        self.calls.append(("cuLaunchKernelEx", (config, fn, params, extra)))
        return (self.result,)

    def cuOccupancyMaxActiveClusters(self, fn: str, config: Any) -> tuple[int, int]:
        self.calls.append(("cuOccupancyMaxActiveClusters", (fn, config)))
        return self.result, self.clusters

    clusters = 33

    def cuGetErrorName(self, err: int) -> tuple[int, bytes]:
        return 0, {COOPERATIVE_TOO_LARGE: b"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"}.get(err, b"CUDA_ERROR_UNKNOWN")

    def cuGetErrorString(self, err: int) -> tuple[int, bytes]:
        return 0, b"too many blocks in cooperative launch"


CODE = LaunchCode("fused", "k_fused", 384, 200_000, (), 64, True, 0, "", None)


def module_with(driver: FakeDriver, monkeypatch: pytest.MonkeyPatch, *codes: LaunchCode) -> launch.CudaModule:
    monkeypatch.setattr(launch, "_driver", lambda: driver)
    monkeypatch.setattr(launch, "ensure_context", lambda index: None)
    return launch.CudaModule(b"cubin", codes, 0)


def test_cooperative_and_cluster_are_the_last_fields_and_off_by_default() -> None:
    fields = dataclasses.fields(LaunchCode)
    assert [(f.name, f.default) for f in fields[-2:]] == [("cooperative", False), ("cluster", 1)]
    assert CODE.cooperative is False and CODE.cluster == 1


@pytest.mark.parametrize(("cooperative", "entry"), [(False, "cuLaunchKernel"), (True, "cuLaunchKernelEx")])
def test_launch_goes_through_the_entry_point_of_its_kind(monkeypatch: pytest.MonkeyPatch, cooperative: bool,
                                                         entry: str) -> None:
    driver = FakeDriver()
    code = dataclasses.replace(CODE, cooperative=cooperative)
    module = module_with(driver, monkeypatch, code)
    module.launch(code, (132, 1, 1), bytes(64), 77)
    module.launch(code, (132, 1, 1), bytes(64), 77)
    assert [name for name, _ in driver.calls] == [entry, entry]
    args = driver.calls[0][1]
    if not cooperative:
        assert args[:9] == ("k_fused", 132, 1, 1, 384, 1, 1, 200_000, 77)
        return
    config, fn, _, extra = args
    assert fn == "k_fused" and extra == 0
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (132, 1, 1)
    assert (config.blockDimX, config.blockDimY, config.blockDimZ, config.sharedMemBytes) == (384, 1, 1, 200_000)
    assert config.hStream == 77 and config.numAttrs == 1
    assert [(a.id, a.value.cooperative) for a in config.attrs] == [(CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, 1)]
    assert driver.calls[1][1][0] is config  # built once per (kernel, grid, stream)
    module.launch(code, (132, 1, 1), bytes(64), 78)
    assert driver.calls[2][1][0].hStream == 78


@pytest.mark.parametrize(("cooperative", "message"), [
    (False, r"cuLaunchKernel k_fused grid=\(132, 1, 1\) block=384 smem=200000: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"),
    (True, r"cuLaunchKernelEx \(cooperative\) k_fused grid=\(132, 1, 1\) block=384 smem=200000; a cooperative grid "
           r"must be resident at once, at most the kernel's blocks per SM x the SMs: "
           r"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE \(too many blocks in cooperative launch\)"),
])
def test_a_failed_launch_names_its_entry_point(monkeypatch: pytest.MonkeyPatch, cooperative: bool,
                                              message: str) -> None:
    code = dataclasses.replace(CODE, cooperative=cooperative)
    module = module_with(FakeDriver(result=COOPERATIVE_TOO_LARGE), monkeypatch, code)
    with pytest.raises(launch.LaunchError, match=message):
        module.launch(code, (132, 1, 1), bytes(64), 77)


def test_the_resident_clusters_are_asked_of_the_driver_once_per_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver()
    code = dataclasses.replace(CODE, cluster=4)
    module = module_with(driver, monkeypatch, code)
    assert module.resident_clusters(code) == module.resident_clusters(code) == 33
    [(name, (fn, config))] = driver.calls
    assert name == "cuOccupancyMaxActiveClusters" and fn == "k_fused"
    assert (config.gridDimX, config.blockDimX, config.sharedMemBytes, config.numAttrs) == (4, 384, 200_000, 0)
    driver.clusters = 0
    with pytest.raises(launch.LaunchError, match="no cluster of 4 CTAs of k_fused"):
        module_with(driver, monkeypatch, code).resident_clusters(code)
