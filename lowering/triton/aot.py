"""Compile a lowered Triton kernel for a GPU target without a GPU (ahead of time).

The interpreter runs a kernel on the CPU but never compiles it; a kernel that interprets correctly can still
fail Triton's compiler (tl.dot's minimum extents, dtype rules of math ops, loop-carried type changes). This
runs the host launcher on CPU tensors with each `@triton.jit` function swapped for a recorder, then compiles
every recorded launch with `triton.compile` for the target, down to a cubin, specialized as Triton's JIT
would specialize that call (constexpr 1s and 16-divisibility, except for the arguments the kernel's
decorator lists in `do_not_specialize`). `cuobjdump` (from the CUDA toolkit, when on PATH) reads registers
and local-memory (spill) bytes from that cubin.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.lowering.lowered import ResourceUsage

from cake.arch import arch as arch_spec

_POINTER_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int32": "i32", "int64": "i64",
                  "bool": "i1", "int8": "i8", "uint8": "u8"}
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "maxnreg")
_DIVISIBILITY = 16  # Triton's launcher marks an argument divisible by this (pointers: bytes; integers: value)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One launch the host launcher made: the `@triton.jit` function and what it was passed."""

    function: str  # its name in the generated module
    jit: Any  # the JITFunction (rebuilt from an interpreted function when the module was loaded interpreted)
    args: tuple[Any, ...]  # positional: pointers, strides, runtime dims
    kwargs: dict[str, Any]  # constexprs and launch options


@dataclass(frozen=True, slots=True)
class Specialization:
    """What Triton's JIT compiles one call as (and keys its kernel cache on, with the options)."""

    signature: dict[str, str]  # argument -> type, or "constexpr"
    constexprs: dict[str, Any]
    attrs: dict[tuple[int, ...], list[list[Any]]]  # argument index -> [["tt.divisibility", 16]]
    options: dict[str, Any]  # launch options (num_warps, ...)

    def key(self) -> tuple[object, ...]:
        return (tuple(self.signature.items()), tuple(sorted(self.constexprs.items())), tuple(sorted(self.attrs)),
                tuple(sorted(self.options.items())))


class _Recorder:
    """Stands in for a jit function: `fn[grid](*args, **kwargs)` records the call instead of launching."""

    def __init__(self, function: str, jit: Any, calls: list[RecordedCall]):
        self.function = function
        self.jit = jit
        self.calls = calls

    def __getitem__(self, grid: object) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append(RecordedCall(self.function, self.jit, args, kwargs))

        return record


def record_launches(loaded: Any, inputs: Sequence[Any]) -> list[RecordedCall]:
    """The launches `loaded(*inputs)` makes, recorded instead of run (the host launcher runs on CPU tensors)."""
    from triton.runtime.jit import JITFunction

    module = sys.modules[loaded.fn.__module__]
    calls: list[RecordedCall] = []
    originals = {launch.function: getattr(module, launch.function) for launch in loaded.lowered.launches}
    for name, original in originals.items():
        setattr(module, name, _Recorder(name, _as_jit(original, JITFunction), calls))
    try:
        loaded.fn(*inputs)
    finally:
        for name, original in originals.items():
            setattr(module, name, original)
    return calls


def specialization(call: RecordedCall) -> Specialization:
    """How Triton's JIT specializes `call`: its launcher's rules, honouring the decorator's
    `do_not_specialize` and `do_not_specialize_on_alignment`."""
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for index, (param, value) in enumerate(zip(call.jit.params, call.args, strict=False)):
        signature[param.name], aligned = _specialize(value, not param.do_not_specialize,
                                                     not param.do_not_specialize_on_alignment)
        if signature[param.name] == "constexpr":  # Triton's JIT specializes an integer 1 away
            constexprs[param.name] = value
        elif aligned:
            attrs[(index,)] = [["tt.divisibility", _DIVISIBILITY]]
    options = {k: v for k, v in call.kwargs.items() if k in _LAUNCH_OPTIONS}
    for key, value in call.kwargs.items():
        if key not in _LAUNCH_OPTIONS:
            signature[key] = "constexpr"
            constexprs[key] = value
    return Specialization(signature, constexprs, attrs, options)


def compile_launches(loaded: Any, inputs: Sequence[Any], arch: str) -> list[tuple[str, Any]]:
    """(launch name, Triton's CompiledKernel) for every launch `loaded(*inputs)` would make, compiled for
    `arch` (e.g. sm_90a) as the JIT would compile it; raises Triton's CompilationError on rejected code."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = {launch.function: launch.name for launch in loaded.lowered.launches}
    major, minor = arch_spec(arch).compute_capability
    target = GPUTarget("cuda", major * 10 + minor, 32)
    compiled = []
    for call in record_launches(loaded, inputs):
        spec = specialization(call)
        source = ASTSource(call.jit, spec.signature, spec.constexprs, spec.attrs)
        compiled.append((names[call.function], triton.compile(source, target=target, options=spec.options)))
    return compiled


def compile_for_target(loaded: Any, inputs: Sequence[Any], arch: str) -> tuple[ResourceUsage, ...]:
    """Compile every launch `loaded(*inputs)` would make, for `arch` (e.g. sm_90a); raises Triton's
    CompilationError on code the compiler rejects. Returns what the compiled kernels use."""
    usage = []
    for name, kernel in compile_launches(loaded, inputs, arch):
        registers, spills = _cubin_usage(kernel.asm.get("cubin"))
        usage.append(ResourceUsage(name, registers, spills, kernel.metadata.shared))
    return tuple(usage)


def _as_jit(function: Any, jit_type: type) -> Any:
    """The JITFunction behind a module attribute. A module loaded under TRITON_INTERPRET=1 holds interpreted
    functions: rebuild the JITFunction with the decorator's specialization arguments, which the compile must
    honour as the JIT on a GPU would."""
    if isinstance(function, jit_type):
        return function
    kwargs = {k: v for k, v in getattr(function, "kwargs", {}).items() if k.startswith("do_not_specialize")}
    return jit_type(function.fn, **kwargs)


def _specialize(value: Any, specialize: bool, align: bool) -> tuple[str, bool]:
    """(signature type, whether Triton's JIT would mark it 16-divisible) of one positional argument: the rules
    of Triton's launcher, so the compile here is the one a GPU call with these arguments makes. An argument
    in `do_not_specialize` keeps its type, even when it is 1, and gets no divisibility."""
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + _POINTER_TYPES[str(value.dtype).removeprefix("torch.")], (
            specialize and align and value.data_ptr() % _DIVISIBILITY == 0)
    if isinstance(value, bool):
        return "u1", False
    if isinstance(value, int):
        if specialize and value == 1:
            return "constexpr", False
        kind = "i32" if -(2**31) <= value < 2**31 else "i64"
        return kind, specialize and align and value % _DIVISIBILITY == 0
    if isinstance(value, float):
        return "fp32", False
    raise TypeError(f"cannot type a kernel argument of type {type(value).__name__}")


def _cuobjdump() -> str | None:
    """Triton's bundled cuobjdump (it matches the cubins Triton writes), else the CUDA toolkit's."""
    import triton.backends.nvidia as nvidia

    bundled = Path(nvidia.__file__).parent / "bin" / "cuobjdump"
    return str(bundled) if bundled.is_file() else shutil.which("cuobjdump")


def disassemble(cubin: bytes) -> str | None:
    """The cubin's SASS (`cuobjdump -sass`), or None without cuobjdump."""
    tool = _cuobjdump()
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=False).stdout


def _cubin_usage(cubin: bytes | None) -> tuple[int | None, int | None]:
    """(registers per thread, spill bytes) from `cuobjdump --dump-resource-usage`, when available. ptxas puts
    spilled registers in the thread's stack frame (`STACK`), not in `LOCAL` (which counts local arrays, and is
    0 for a spilling Triton kernel): a Triton kernel declares no local arrays, so its stack frame is its spills."""
    tool = _cuobjdump()
    if cubin is None or tool is None:
        return None, None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        out = subprocess.run([tool, "--dump-resource-usage", str(path)], capture_output=True, text=True,
                             check=False).stdout
    registers = re.search(r"REG:(\d+)", out)
    frame = [int(m.group(1)) for m in (re.search(rf"{field}:(\d+)", out) for field in ("STACK", "LOCAL")) if m]
    return (int(registers.group(1)) if registers else None, sum(frame) if frame else None)
