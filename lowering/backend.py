"""The backend protocol and registry. A backend is a pass pipeline plus an emitter, a loader and its
toolchain versions; the runtime (`cake.lowering.runtime`) does the rest — checking, caching, loading,
mapping compiler errors back to the schedule — the same way for every backend.

A backend registers itself when its module is imported::

    # cake/lowering/cuda/__init__.py
    from cake.lowering.backend import register_backend
    register_backend(CudaBackend())

`get_backend("cuda")` imports `cake.lowering.cuda` on first use (see `PROVIDERS`), so the CLI and the
runtime never import a backend they do not need.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from cake.ir.nodes import Kernel
from cake.lowering import codes
from cake.lowering.cache import KernelCache
from cake.lowering.lowered import EmitResult, LoweredKernel, ResourceUsage
from cake.lowering.pipeline import LowerContext, Pass

from cake.diagnostics import Diagnostic, DiagnosticError

# The module that registers each known backend when imported.
PROVIDERS: dict[str, str] = {
    "triton": "cake.lowering.triton",
    "cuda": "cake.lowering.cuda",
}


@runtime_checkable
class Backend(Protocol):
    """What the runtime needs from a backend."""

    name: str  # "triton", "cuda"
    codegen_version: str  # bump when the emitted code changes meaning: it is part of the cache key
    source_suffix: str  # ".py", ".cu": what `cake lower -o` writes

    @property
    def passes(self) -> tuple[Pass, ...]:
        """Kernel -> Kernel passes, in order; the first should be the checker for this backend."""
        ...

    def emit(self, kernel: Kernel, ctx: LowerContext) -> EmitResult:
        """Turn the last pass's kernel into source. Raises DiagnosticError for what it cannot express."""
        ...

    def toolchain(self) -> dict[str, str]:
        """Versions of everything that changes the compiled code (e.g. triton, torch, nvcc)."""
        ...

    def load(self, lowered: LoweredKernel, cache: KernelCache) -> Callable[..., Any]:
        """Compile (or reuse what `cache` holds under `lowered.key`) and return the host callable: the op's
        inputs as torch tensors in signature order -> output tensor(s)."""
        ...

    def compile_errors(self) -> tuple[type[BaseException], ...]:
        """Exception types the backend's compiler raises on bad generated code (caught at call time)."""
        ...

    def diagnose(self, lowered: LoweredKernel, error: BaseException) -> Diagnostic:
        """A compiler error as a diagnostic, located in the schedule where the source map allows."""
        ...

    def resources(self, fn: Callable[..., Any]) -> tuple[ResourceUsage, ...]:
        """What the compiler reported for the kernels `fn` launched last (empty before any compile, and
        where the backend has no such report, e.g. under an interpreter)."""
        ...


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    _BACKENDS[backend.name] = backend
    return backend


def backend_names() -> tuple[str, ...]:
    """Every backend CAKE knows how to find (registered or importable on demand)."""
    return tuple(dict.fromkeys((*PROVIDERS, *_BACKENDS)))


def get_backend(name: str) -> Backend:
    """The backend named `name`, importing its provider module on first use."""
    if name not in _BACKENDS and name in PROVIDERS:
        try:
            importlib.import_module(PROVIDERS[name])
        except ImportError as error:
            raise _unavailable(name, f"its module {PROVIDERS[name]} cannot be imported ({error})") from None
    backend = _BACKENDS.get(name)
    if backend is None:
        if name in PROVIDERS:
            raise _unavailable(name, f"{PROVIDERS[name]} does not register it yet")
        raise _unavailable(name, f"known backends: {', '.join(backend_names())}")
    return backend


def _unavailable(name: str, why: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic(codes.NO_BACKEND, f"backend `{name}` is not available: {why}",
                                       subject=name)])
