"""The CUDA host callable refuses a static dim whose launch does not fit the target (ShapeNotSupported,
before any compile or launch), and keeps a shape-independent overflow an error. CPU only: the refusal is
decided by the checker run on the call's specialization (static dims bound), or for the shared memory only
codegen adds, at code generation — before nvcc or the driver is touched."""

from __future__ import annotations

import pytest
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.lowering.cuda.backend import CudaKernel, shape_refusal, specialize_for_call
from cake.lowering.cuda.errors import LoweringError
from cuda_cases import KMEANS

from cake.diagnostics import Diagnostic, DiagnosticError
from cake.errors import ShapeNotSupported

LONG = {"B": 1, "N": 5, "K": 3, "D": 1031}  # the kmeans_assign contract's long reduction


# Declared buffers overflow in the checker (E0301, D bound); assign_plain declares none: the operands codegen
# stages are the overflow, found at code generation.
WHY = {"assign_pingpong": "E0301 shared memory over budget", "assign_cp_async": "E0301 shared memory over budget",
       "assign_plain": "bytes of shared memory (declared buffers, barriers, staging"}


@pytest.mark.parametrize("name", sorted(WHY))
def test_an_on_chip_tile_schedule_refuses_the_long_reduction(name: str) -> None:
    kernel = parse((KMEANS / f"{name}.cake").read_text(), f"{name}.cake")
    host = CudaKernel(kernel, kernel.target)
    with pytest.raises(ShapeNotSupported) as refused:
        host.specialize({"T": DType.BF16}, LONG, (9, 0) if kernel.target != "sm_80" else (8, 0), 0)
    reason = refused.value.reason
    assert "D=1031" in reason and WHY[name] in reason
    assert host.specs == {}  # nothing compiled, nothing cached


def test_the_call_time_check_sees_the_static_dims() -> None:
    """A padded static D (33: rows padded to whole k-steps) is accepted by the checker at call time and
    lowered; the bound dtype narrows the schedule the checker judges."""
    kernel = parse((KMEANS / "assign_pingpong.cake").read_text(), "assign_pingpong.cake")
    bound = specialize_for_call(kernel, "sm_90a", {"T": DType.F16}, {"D": 33})
    assert [d.choices for d in bound.dtype_vars] == [(DType.F16,)]
    with pytest.raises(DiagnosticError) as refused:  # a dtype the schedule does not serve: E0703
        specialize_for_call(kernel, "sm_90a", {"T": DType.F32}, {"D": 33})
    assert [d.code for d in refused.value.diagnostics] == ["E0703"]


def test_a_declared_dtype_the_backend_cannot_lower_is_a_refusal() -> None:
    """assign_plain declares f32, which the CUDA backend's `via dot` cannot take (E0611, a warning for the whole
    domain): a call bound to it is refused like a shape, not a crash of the verifier's worker (session 8's GPU
    evolve lost its seed to one); f16 at the same dims lowers."""
    kernel = parse((KMEANS / "assign_plain.cake").read_text(), "assign_plain.cake")
    with pytest.raises(ShapeNotSupported) as refused:
        specialize_for_call(kernel, "sm_90a", {"T": DType.F32}, {"D": 64})
    assert "cannot run with T = f32" in refused.value.reason and "E0611" in refused.value.reason
    assert [d.choices for d in specialize_for_call(kernel, "sm_90a", {"T": DType.F16}, {"D": 64}).dtype_vars] \
        == [(DType.F16,)]


def test_an_overflow_at_every_shape_stays_a_compile_error() -> None:
    text = (KMEANS / "assign_cp_async.cake").read_text()
    text = text.replace("smem cs[STAGES]: T[BK, D] swizzle 128B", "smem cs[STAGES]: T[BK, D] swizzle 128B\nsmem pad: f32[65536]")
    kernel = parse(text, "k.cake")
    with pytest.raises(DiagnosticError) as raised:  # the checker's refusal: it overflows at D = 1 too
        CudaKernel(kernel, kernel.target).specialize({"T": DType.F16}, {**LONG, "D": 64}, (8, 0), 0)
    assert not isinstance(raised.value, ShapeNotSupported)
    assert [d.code for d in raised.value.diagnostics] == ["E0301"] and raised.value.diagnostics[0].span is not None


def test_only_resource_diagnostics_are_refusals() -> None:
    kernel = parse((KMEANS / "assign_plain.cake").read_text(), "assign_plain.cake")
    other = LoweringError([Diagnostic("C0100", "a statement this backend cannot lower")])
    assert shape_refusal(kernel, "sm_90a", {"T": DType.BF16}, {"D": 1031}, other) is None
