"""What Triton allocates for a schedule's code, compiled here for a GPU target, in the cost model's units.

The cost model's static register estimate cannot see the layouts Triton chooses: an 8-warp 128x128 `assign_plain`
tile compiles to 173 registers a thread where the estimate says 96, which halves the CTAs an SM holds. The
evolve loop's ranker and the cost fit price Triton candidates with what the compiler allocated instead
(`cake.ir.cost.predict`'s `allocations`), as they price the CUDA backend's with ptxas's spills.

The compile needs no GPU (`cake.lowering.triton.aot`): the host launcher runs on inputs on torch's `meta`
device (only shapes and dtypes decide a specialization), and each recorded launch is compiled to a cubin. It
must run in a process where Triton is not told to interpret (`TRITON_INTERPRET`), and the Triton installed
here decides the code: a calibration keyed to another Triton version must not be priced with it
(`triton_version`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from cake.ir import analysis as an
from cake.ir.cost import dtype_bindings
from cake.ir.cost_timing import Allocation
from cake.ir.nodes import Direction, DType, Kernel
from cake.lowering.cuda.backend import torch_dtype
from cake.lowering.lowered import ResourceUsage
from cake.lowering.runtime import load, lower
from cake.lowering.triton.aot import compile_for_target

BYTES_PER_REGISTER = 4


class InterpreterSet(RuntimeError):
    """TRITON_INTERPRET is set in this process: Triton cannot compile what it was told to interpret."""


class NotCompiled(Exception):
    """Triton's compiler rejected the generated code (its CompilationError, first line kept)."""


def triton_version() -> str:
    import triton

    return str(triton.__version__)


def compiled_allocations(kernel: Kernel, arch: str, dims: Mapping[str, int], dtype: DType) -> dict[str, Allocation]:
    """Per launch name, the registers, spills and shared memory Triton allocates for `kernel` (params bound)
    compiled for `arch` at `dims`, every dtype variable bound to `dtype`. Raises InterpreterSet under the
    interpreter, DiagnosticError when the backend refuses the schedule, and NotCompiled when Triton's compiler
    rejects the code."""
    from triton.compiler.errors import CompilationError

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise InterpreterSet("TRITON_INTERPRET is set: compile Triton kernels for a target in a process without it")
    loaded = load(lower(kernel, "triton", arch=arch))
    try:
        usage = compile_for_target(loaded, _meta_inputs(kernel, dims, dtype), arch)
    except CompilationError as error:
        raise NotCompiled(f"Triton could not compile `{kernel.name}` for {arch}: {str(error).strip()[:200]}") from error
    return {u.launch: _allocation(u) for u in usage if u.registers_per_thread is not None}


def _meta_inputs(kernel: Kernel, dims: Mapping[str, int], dtype: DType) -> tuple[Any, ...]:
    """The op's inputs (the kernel's `in` and `inout` tensors, in order) at `dims`, on torch's `meta` device."""
    import torch

    env = an.default_env(kernel, dims, dtype_bindings(kernel, dtype))
    inputs = []
    for tensor in kernel.tensors:
        if tensor.direction is Direction.OUT:
            continue
        elem = an.resolve_elem(tensor.type.elem, env)
        assert elem is not None, f"tensor `{tensor.name}`'s dtype is unbound after binding every dtype variable"
        shape = tuple(an.value(extent, env) for extent in tensor.type.shape)
        inputs.append(torch.empty(shape, dtype=torch_dtype(elem), device="meta"))
    return tuple(inputs)


def _allocation(usage: ResourceUsage) -> Allocation:
    assert usage.registers_per_thread is not None
    return Allocation(usage.registers_per_thread, (usage.spill_bytes or 0) / BYTES_PER_REGISTER, usage.smem_bytes)
