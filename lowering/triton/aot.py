"""Compile a lowered Triton kernel for a GPU target without a GPU (ahead of time).

The interpreter runs a kernel on the CPU but never compiles it; a kernel that interprets correctly can still
fail Triton's compiler (tl.dot's minimum extents, dtype rules of math ops, loop-carried type changes). This
runs the host launcher on CPU tensors with each `@triton.jit` function swapped for a recorder, then compiles
every recorded launch with `triton.compile` for the target, down to a cubin. `cuobjdump` (from the CUDA
toolkit, when on PATH) reads registers and local-memory (spill) bytes from that cubin.
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


@dataclass(frozen=True, slots=True)
class _Call:
    function: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class _Recorder:
    """Stands in for a jit function: `fn[grid](*args, **kwargs)` records the call instead of launching."""

    def __init__(self, function: str, calls: list[_Call]):
        self.function = function
        self.calls = calls

    def __getitem__(self, grid: object) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append(_Call(self.function, args, kwargs))

        return record


def compile_for_target(loaded: Any, inputs: Sequence[Any], arch: str) -> tuple[ResourceUsage, ...]:
    """Compile every launch `loaded(*inputs)` would make, for `arch` (e.g. sm_90a); raises Triton's
    CompilationError on code the compiler rejects. Returns what the compiled kernels use."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    module = sys.modules[loaded.fn.__module__]
    calls: list[_Call] = []
    functions = {launch.function: launch.name for launch in loaded.lowered.launches}
    originals = {name: getattr(module, name) for name in functions}
    for name in functions:
        setattr(module, name, _Recorder(name, calls))
    try:
        loaded.fn(*inputs)
    finally:
        for name, original in originals.items():
            setattr(module, name, original)
    major, minor = arch_spec(arch).compute_capability
    target = GPUTarget("cuda", major * 10 + minor, 32)
    usage = []
    for call in calls:
        original = originals[call.function]
        jit = original if isinstance(original, JITFunction) else JITFunction(original.fn)
        signature: dict[str, str] = {}
        constexprs: dict[str, Any] = {}
        for arg_name, value in zip(jit.arg_names, call.args, strict=False):
            signature[arg_name] = _type(value)
            if signature[arg_name] == "constexpr":  # Triton's JIT specializes an integer 1 away
                constexprs[arg_name] = value
        options = {k: v for k, v in call.kwargs.items() if k in _LAUNCH_OPTIONS}
        for key, value in call.kwargs.items():
            if key not in _LAUNCH_OPTIONS:
                signature[key] = "constexpr"
                constexprs[key] = value
        compiled = triton.compile(ASTSource(jit, signature, constexprs), target=target, options=options)
        registers, spills = _cubin_usage(compiled.asm.get("cubin"))
        usage.append(ResourceUsage(functions[call.function], registers, spills, compiled.metadata.shared))
    return tuple(usage)


def _type(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + _POINTER_TYPES[str(value.dtype).removeprefix("torch.")]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        if value == 1:
            return "constexpr"
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"cannot type a kernel argument of type {type(value).__name__}")


def _cuobjdump() -> str | None:
    """Triton's bundled cuobjdump (it matches the cubins Triton writes), else the CUDA toolkit's."""
    import triton.backends.nvidia as nvidia

    bundled = Path(nvidia.__file__).parent / "bin" / "cuobjdump"
    return str(bundled) if bundled.is_file() else shutil.which("cuobjdump")


def _cubin_usage(cubin: bytes | None) -> tuple[int | None, int | None]:
    """(registers per thread, local-memory bytes) from `cuobjdump --dump-resource-usage`, when available."""
    tool = _cuobjdump()
    if cubin is None or tool is None:
        return None, None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        out = subprocess.run([tool, "--dump-resource-usage", str(path)], capture_output=True, text=True,
                             check=False).stdout
    registers = re.search(r"REG:(\d+)", out)
    local = re.search(r"LOCAL:(\d+)", out)
    return (int(registers.group(1)) if registers else None, int(local.group(1)) if local else None)
