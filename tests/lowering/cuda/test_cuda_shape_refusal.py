"""The CUDA host callable refuses a static dim whose launch does not fit the target (ShapeNotSupported,
before any compile or launch), and keeps a shape-independent overflow a compile error. CPU only: the
refusal is decided at code generation, before nvcc or the driver is touched."""

from __future__ import annotations

import pytest
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.lowering.cuda.backend import CudaKernel, shape_refusal
from cake.lowering.cuda.errors import LoweringError
from cuda_cases import KMEANS

from cake.diagnostics import Diagnostic
from cake.errors import ShapeNotSupported

LONG = {"B": 1, "N": 5, "K": 3, "D": 1031}  # the kmeans_assign contract's long reduction


@pytest.mark.parametrize("name", ["assign_pingpong", "assign_cp_async", "assign_plain"])
def test_an_on_chip_tile_schedule_refuses_the_long_reduction(name: str) -> None:
    kernel = parse((KMEANS / f"{name}.cake").read_text(), f"{name}.cake")
    host = CudaKernel(kernel, kernel.target)
    with pytest.raises(ShapeNotSupported) as refused:
        host.specialize({"T": DType.BF16}, LONG, (9, 0) if kernel.target != "sm_80" else (8, 0), 0)
    assert "D=1031" in refused.value.reason and "bytes of shared memory" in refused.value.reason
    assert host.specs == {}  # nothing compiled, nothing cached


def test_an_overflow_at_every_shape_stays_a_compile_error() -> None:
    text = (KMEANS / "assign_cp_async.cake").read_text()
    text = text.replace("smem cs[STAGES]: T[BK, D] swizzle 128B", "smem cs[STAGES]: T[BK, D] swizzle 128B\nsmem pad: f32[65536]")
    kernel = parse(text, "k.cake")
    with pytest.raises(LoweringError) as raised:
        CudaKernel(kernel, kernel.target).specialize({"T": DType.F16}, {**LONG, "D": 64}, (8, 0), 0)
    assert shape_refusal(kernel, kernel.target, {"T": DType.F16}, {"D": 64}, raised.value) is None


def test_only_resource_diagnostics_are_refusals() -> None:
    kernel = parse((KMEANS / "assign_plain.cake").read_text(), "assign_plain.cake")
    other = LoweringError([Diagnostic("C0100", "a statement this backend cannot lower")])
    assert shape_refusal(kernel, "sm_90a", {"T": DType.BF16}, {"D": 1031}, other) is None
