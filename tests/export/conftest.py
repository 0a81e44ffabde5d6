"""The exported packages the export tests share (exported once per session: a package's ops register once per
process): a Triton package (assign_plain + update_onehot), a Triton package whose kernels keep scratch buffers
(assign_plain_norms + update_atomic) and a CUDA package (the ping-pong assign, D = 64)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from cake.lowering.cuda.compile import find_nvcc

from cake.export import export_package, from_files
from cake.export.certify import import_package
from tests.export.packages import CUDA_PKG, FK, TRITON_PKG, TRITON_SCRATCH_PKG


@pytest.fixture(scope="session")
def triton_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "triton"
    export_package(from_files([FK / "assign_plain.cake", FK / "update_onehot.cake"]), out, name=TRITON_PKG)
    return out


@pytest.fixture(scope="session")
def triton_pkg(triton_export: Path) -> ModuleType:
    return import_package(triton_export)


@pytest.fixture(scope="session")
def triton_scratch_pkg(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    out = tmp_path_factory.mktemp("export") / "triton_scratch"
    export_package(from_files([FK / "assign_plain_norms.cake", FK / "update_atomic.cake"]), out,
                   name=TRITON_SCRATCH_PKG)
    return import_package(out)


@pytest.fixture(scope="session")
def cuda_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: the CUDA export compiles cubins at export time")
    out = tmp_path_factory.mktemp("export") / "cuda"
    export_package(from_files([FK / "assign_pingpong.cake"]), out, name=CUDA_PKG, backend="cuda",
                   archs=("sm_90a",), static_overrides={"D": [64]})
    return out


@pytest.fixture(scope="session")
def cuda_pkg(cuda_export: Path) -> ModuleType:
    return import_package(cuda_export)


@pytest.fixture
def fake_driver(cuda_pkg: ModuleType, monkeypatch: pytest.MonkeyPatch) -> object:
    """The CUDA package's driver replaced by scripts/bench_export_host_cpu.py's counting fake on device 0 of an
    H200-sized GPU (132 SMs), so a CUDA call plan runs, and is counted, on CPU tensors. Returns the fake."""
    import bench_export_host_cpu as bench
    import torch

    driver = bench.CountingDriver()
    monkeypatch.setattr(cuda_pkg._cuda, "_lib", driver)
    monkeypatch.setattr(cuda_pkg._cuda, "current_stream", lambda index: 77)
    monkeypatch.setattr(cuda_pkg._cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), {"multi_processor_count": 132}))
    return driver
