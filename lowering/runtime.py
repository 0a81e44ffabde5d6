"""Lower, compile, cache and load schedules as Python callables — the same way for every backend.

    from cake.lowering.runtime import lower, load
    lowered = lower(kernel, "triton", params={"BN": 64})   # LoweredKernel: source, entry, cache key
    assign = load(lowered)                                   # LoadedKernel: assign(x, c) -> ids
    ids = assign(x, c)

The callable takes the schedule's `in`/`inout` tensors in declaration order (the op contract's input
order) and returns its `out` tensors (one tensor, or a tuple). Dtype variables are bound from the input
tensors at each call; dims from their shapes. Compiler errors raised at call time become `KernelCompileError`
(a `DiagnosticError` and a `RuntimeError`) located at the schedule line that produced the failing code.

The verifier's worker loads schedules by name (`SCHEDULE_LOADER`: `load_schedule(path, backend=, arch=,
params=)`, the options a `KernelRef` carries) and asks for their op with `schedule_op(path)`. A backend or
arch left unset falls back to `$CAKE_BACKEND` (default `triton`) and `$CAKE_ARCH` (default: the schedule's
target), for a user's shell; CAKE itself always names them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.ir.nodes import Kernel
from cake.lowering.ahead import AheadReport, CompilesAhead
from cake.lowering.backend import Backend, get_backend
from cake.lowering.cache import CacheKey, KernelCache, default_cache, ir_hash
from cake.lowering.lowered import LoweredKernel, ResourceUsage
from cake.lowering.pipeline import EMIT, LowerContext, guarded, run_passes

from cake.arch import arch as arch_spec
from cake.diagnostics import Diagnostic, DiagnosticError, render_all

# The verifier names its schedule loader by this string (it never imports the lowering); `cake verify
# --schedule`, `cake bench` and the evaluator all use it, so their verdict cache keys agree.
SCHEDULE_LOADER = f"{__name__}:load_schedule"
BACKEND_ENV = "CAKE_BACKEND"
ARCH_ENV = "CAKE_ARCH"
DEFAULT_BACKEND = "triton"


class KernelCompileError(DiagnosticError, RuntimeError):
    """The backend's compiler rejected generated code (raised when the callable compiles, at first call)."""


class ScheduleError(DiagnosticError):
    """A schedule that cannot be parsed, checked or lowered; `str()` is the rendered diagnostics."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...], source: str | None):
        super().__init__(diagnostics)
        self.source = source

    def __str__(self) -> str:
        return "\n" + render_all(self.diagnostics, self.source)


def lower(kernel: Kernel, backend: str = DEFAULT_BACKEND, *, params: Mapping[str, int] | None = None,
          arch: str | None = None, filename: str = "<input>", source_text: str | None = None,
          dump_after: str | None = None, dump: Callable[[str, Kernel], None] | None = None) -> LoweredKernel:
    """Run `backend`'s pipeline on `kernel` for one param assignment and target (default: its `target`).

    Raises DiagnosticError when a pass refuses (checker findings, an unknown param, a construct the backend
    cannot express). `dump_after` names a pass after which `dump(name, kernel)` is called.
    """
    be = get_backend(backend)
    target = arch_spec(arch or kernel.target).name
    ctx = LowerContext(be.name, target, dict(params or {}), filename)
    specialized = run_passes(kernel, be.passes, ctx, dump_after=dump_after, dump=dump)
    with guarded(f"{be.name} {EMIT}", specialized):
        emitted = be.emit(specialized, ctx)
    toolchain = tuple(sorted(be.toolchain().items()))
    digest = ir_hash(specialized)
    key = CacheKey(digest, target, be.name, be.codegen_version, toolchain).digest
    return LoweredKernel(
        schedule=kernel.name, op=kernel.op, backend=be.name, arch=target,
        params=tuple((p.name, p.default) for p in specialized.params), source=emitted.source,
        entry=emitted.entry, launches=emitted.launches, ir_hash=digest, key=key, toolchain=toolchain,
        filename=filename, schedule_text=source_text, source_map=emitted.source_map, artifacts=emitted.artifacts)


@dataclass(eq=False)
class LoadedKernel:
    """A lowered kernel as a callable with the op's signature."""

    lowered: LoweredKernel
    fn: Callable[..., Any]
    backend: Backend

    def __post_init__(self) -> None:
        self._compile_errors = self.backend.compile_errors()
        self.__name__ = self.lowered.schedule

    def __call__(self, *inputs: Any, **given: Any) -> Any:
        """The op at these inputs; keyword arguments go to the backend's callable (the Triton launcher's `out=` and
        `workspace=`: lowering/triton/module.py)."""
        try:
            return self.fn(*inputs, **given)
        except self._compile_errors as error:
            raise KernelCompileError([self.backend.diagnose(self.lowered, error)]) from error

    def resources(self) -> tuple[ResourceUsage, ...]:
        """The compiler's report for the kernels of the latest call (empty under an interpreter)."""
        return self.backend.resources(self.fn)

    def compile_ahead(self, calls: Sequence[tuple[Any, ...]], *, capability: tuple[int, int],
                      jobs: int) -> AheadReport:
        """Build the specializations `calls` (inputs on torch's `meta` device) will need, for a device of
        `capability`, `jobs` compiles at a time (`cake.lowering.ahead`); a backend that compiles nothing per call
        says so in the report."""
        if not isinstance(self.fn, CompilesAhead):
            return AheadReport(unsupported=f"the {self.lowered.backend} backend builds no per-call specializations "
                                           "ahead of its calls")
        return self.fn.compile_ahead(calls, capability, jobs)


def load(lowered: LoweredKernel, *, cache: KernelCache | None = None) -> LoadedKernel:
    """The callable for `lowered`, from the in-memory cache, the disk cache, or a fresh compile/import."""
    cache = cache if cache is not None else default_cache()
    hit = cache.loaded.get(lowered.key)
    if hit is not None:
        cache.stats.memory_hits += 1
        return hit  # type: ignore[no-any-return]
    on_disk = cache.has_manifest(lowered.key)
    backend = get_backend(lowered.backend)
    loaded = LoadedKernel(lowered, backend.load(lowered, cache), backend)
    if on_disk:
        cache.stats.disk_hits += 1
    else:
        cache.stats.misses += 1
        cache.write_manifest(lowered.key, {
            "schedule": lowered.schedule, "op": lowered.op, "backend": lowered.backend, "arch": lowered.arch,
            "params": dict(lowered.params), "ir_hash": lowered.ir_hash, "toolchain": dict(lowered.toolchain),
            "entry": lowered.entry})
    cache.loaded[lowered.key] = loaded
    return loaded


# ---- schedule files: the verifier's loader entry points ------------------------------------------------


def read_schedule(path: str | Path) -> tuple[Kernel, str]:
    """Parse a `.cake` file; raises ScheduleError (rendered diagnostics) when it does not parse."""
    from cake.ir.parser import parse

    text = Path(path).read_text(encoding="utf-8")
    try:
        return parse(text, str(path)), text
    except DiagnosticError as error:
        raise ScheduleError(error.diagnostics, text) from None


def schedule_op(path: str) -> str:
    """The op contract a schedule implements (`schedule NAME implements OP`)."""
    return read_schedule(path)[0].op


def load_schedule(path: str, *, backend: str | None = None, arch: str | None = None,
                  params: str | None = None) -> LoadedKernel:
    """Lower the schedule at `path` and load it (the verifier's loader: `SCHEDULE_LOADER`).

    `backend`, `arch` and `params` (a JSON object of integers, `{"BN": 64}`; default: the schedule's own
    defaults) are what a `KernelRef`'s options carry, so a worker builds exactly the kernel it was named.
    Unset backend/arch fall back to $CAKE_BACKEND/$CAKE_ARCH — for a user's shell (`CAKE_BACKEND=cuda cake
    verify ...`), never set by CAKE itself — and then to the backend's defaults."""
    assignment = json.loads(params or "{}")
    if not isinstance(assignment, dict) or not all(isinstance(v, int) for v in assignment.values()):
        raise ValueError(f"params must be a JSON object of integers, got {params!r}")
    kernel, text = read_schedule(path)
    backend = backend or os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND
    try:
        lowered = lower(kernel, backend, params=assignment, arch=arch or os.environ.get(ARCH_ENV) or None,
                        filename=str(path), source_text=text)
    except DiagnosticError as error:
        raise ScheduleError(error.diagnostics, text) from None
    return load(lowered)
