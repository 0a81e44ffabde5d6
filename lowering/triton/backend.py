"""The Triton backend: passes, emitter, loader, and compiler-error diagnostics."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from cake.ir.nodes import Kernel
from cake.ir.parser import parse
from cake.lowering import codes
from cake.lowering.cache import KernelCache
from cake.lowering.lowered import EmitResult, LoweredKernel, ResourceUsage
from cake.lowering.passes.bind_params import bind_params
from cake.lowering.passes.check import check_for_backend
from cake.lowering.passes.registerize_smem import registerize_smem
from cake.lowering.pipeline import LowerContext, Pass
from cake.lowering.triton.budget import TritonLauncher
from cake.lowering.triton.module import emit_module

from cake.diagnostics import Diagnostic

PASSES: tuple[Pass, ...] = (
    Pass("bind_params", bind_params, "fix each param to the assignment (defaults elsewhere)"),
    Pass("check", check_for_backend, "static checks, with what the Triton backend cannot express"),
    Pass("registerize_smem", registerize_smem, "copies `via load|cp_async` into smem become register tiles"),
)


class TritonBackend:
    name = "triton"
    # Bump when the generated code changes meaning: the compile cache keys on it.
    # 9: a launch refuses a tensor spanning more elements than 32-bit offsets address (`_K_MAX_OFFSET`);
    # 8: a launch given tracing tensors goes through torch's wrap_triton (`_k_traceable`); 7: out= and workspace=
    # (a caller's outputs and scratch memory); 6: call plans (a call signature seen before replays its record);
    # 5: dead fills dropped
    codegen_version = "9"
    source_suffix = ".py"

    @property
    def passes(self) -> tuple[Pass, ...]:
        return PASSES

    def emit(self, kernel: Kernel, ctx: LowerContext) -> EmitResult:
        return emit_module(kernel, ctx.arch, ctx.filename)

    def toolchain(self) -> dict[str, str]:
        # Read from package metadata: importing triton here would fix TRITON_INTERPRET too early.
        return {name: importlib.metadata.version(name) for name in ("triton", "torch")}

    def load(self, lowered: LoweredKernel, cache: KernelCache) -> Callable[..., Any]:
        # Triton's JIT reads a kernel's source through `inspect`, so the module must be a real file.
        path = cache.write_text(lowered.key, f"{lowered.schedule}{self.source_suffix}", lowered.source)
        module_name = f"cake_generated_{lowered.key}"
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec is not None and spec.loader is not None, path
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        fn: Callable[..., Any] = getattr(module, lowered.entry)
        kernel = parse(lowered.schedule_text, lowered.filename) if lowered.schedule_text is not None else None
        return TritonLauncher(fn, kernel, lowered.arch, dict(lowered.params))

    def compile_errors(self) -> tuple[type[BaseException], ...]:
        from triton.compiler.errors import CompilationError

        return (CompilationError,)

    def diagnose(self, lowered: LoweredKernel, error: BaseException) -> Diagnostic:
        line = _generated_line(lowered.source, error)
        span = None if line is None else lowered.source_map.span_at(line)
        reason = _reason(error)
        notes: tuple[str, ...] = ()
        if line is not None:
            notes = (f"generated line {line}: {lowered.source.splitlines()[line - 1].strip()}",)
        return Diagnostic(codes.COMPILE_ERROR, f"Triton could not compile the generated kernel: {reason}",
                          span=span, file=lowered.filename, subject=lowered.schedule, notes=notes,
                          help="`cake lower` shows the generated source")

    def resources(self, fn: Callable[..., Any]) -> tuple[ResourceUsage, ...]:
        fn = fn.fn if isinstance(fn, TritonLauncher) else fn
        module: ModuleType | None = sys.modules.get(getattr(fn, "__module__", ""))
        compiled = getattr(module, "_k_compiled", {}) if module is not None else {}
        usage = []
        for launch, kernel in compiled.items():
            if kernel is None or not hasattr(kernel, "n_regs"):
                continue  # the interpreter compiles nothing
            shared = getattr(getattr(kernel, "metadata", None), "shared", None)
            usage.append(ResourceUsage(launch, kernel.n_regs, kernel.n_spills, shared))
        return tuple(usage)


def _generated_line(source: str, error: BaseException) -> int | None:
    """The generated line a CompilationError points at: its function's `def` line plus the node's line."""
    src, node = getattr(error, "src", None), getattr(error, "node", None)
    lineno = getattr(node, "lineno", None)
    if not src or lineno is None:
        return None
    first = src.splitlines()[0].strip()
    for number, text in enumerate(source.splitlines(), start=1):
        if text.strip() == first:
            return number + lineno - 1
    return None


def _reason(error: BaseException) -> str:
    text = getattr(error, "error_message", None) or str(error)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__
