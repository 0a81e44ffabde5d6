"""The CUDA backend as the runtime sees it (`cake.lowering.backend.Backend`), and its host callable.

`emit` writes the default specialization (dtype variables at bf16 where allowed, static dims at
DEFAULT_STATIC_DIM) for `cake lower`; the callable specializes again for each call's dtypes and static
dims — through the same pipeline (`PASSES`: the dtypes bound, then the checker with the static dims bound,
so every budget and box limit is proven for that call before codegen) — compiles with nvcc (cached on disk
under the runtime's cache root), and launches every IR launch in order on torch's current stream. Inputs are the schedule's `in`/`inout` tensors in declaration order; the
result is its `out` tensor (or a tuple of them).
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake.ir import analysis as an
from cake.ir.nodes import Direction, DType, GridKind, Kernel, Name, TypeVar
from cake.ir.overwrite import overwritten_scratch
from cake.lowering import codes
from cake.lowering.ahead import AheadEntry, AheadReport, AheadStatus
from cake.lowering.cache import KernelCache
from cake.lowering.cuda.compile import (
    CompiledModule,
    CompileError,
    KernelResources,
    ResourceReport,
    compile_cubin,
    nvcc_version,
)
from cake.lowering.cuda.errors import Code, LoweringError
from cake.lowering.cuda.program import CODEGEN_VERSION, CudaProgram, generate
from cake.lowering.lowered import EmitResult, LaunchInfo, LoweredKernel, ResourceUsage, SourceMap
from cake.lowering.passes.bind_dtypes import bind_dtypes
from cake.lowering.passes.bind_params import bind_params
from cake.lowering.passes.check import check_for_backend
from cake.lowering.pipeline import LowerContext, Pass, run_passes

from cake.arch import ARCHS, THREADS_PER_WARP
from cake.arch import arch as arch_spec
from cake.diagnostics import Diagnostic, DiagnosticError, Span
from cake.errors import ShapeNotSupported

PASSES: tuple[Pass, ...] = (
    Pass("bind_params", bind_params, "fix each param to the assignment (defaults elsewhere)"),
    Pass("bind_dtypes", bind_dtypes, "narrow dtype variables to a call's types (at call time; no-op otherwise)"),
    Pass("check", check_for_backend, "static checks for the target, with what the CUDA backend cannot express"),
)
# Targets whose code uses no arch-specific ('a') instructions run on any later device of the same or a
# newer family when compiled for that device.
PORTABLE_TARGETS = frozenset({"sm_80", "sm_90"})
SCHEDULE_ARTIFACT = "schedule.cake"  # the specialized IR, printed, for loaders without the original text


def source_map(source: str) -> SourceMap:
    from cake.lowering.cuda.compile import SPAN_MARKER

    lines = []
    for number, text in enumerate(source.splitlines(), start=1):
        if m := SPAN_MARKER.search(text):
            lines.append((number, Span.point(int(m.group(1)), int(m.group(2)))))
    return SourceMap(tuple(lines))


def torch_dtype(dtype: DType) -> Any:
    import torch

    return {DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16, DType.I32: torch.int32,
            DType.I64: torch.int64, DType.BOOL: torch.bool}[dtype]


def ir_dtype(t: Any) -> DType | None:
    import torch

    return {torch.float32: DType.F32, torch.float16: DType.F16, torch.bfloat16: DType.BF16, torch.int32: DType.I32,
            torch.int64: DType.I64, torch.bool: DType.BOOL}.get(t)


def device_arch(capability: tuple[int, int]) -> str | None:
    """The richest target of a device (the 'a' variant where there is one)."""
    names = [a.name for a in ARCHS.values() if a.compute_capability == capability]
    return max(names, key=lambda n: n.endswith("a"), default=None)


def compile_target(schedule_arch: str, capability: tuple[int, int]) -> str:
    """The nvcc target to build `schedule_arch` code for a device of `capability`."""
    spec = arch_spec(schedule_arch)
    dev = device_arch(capability)
    if spec.compute_capability == capability:
        return schedule_arch
    if schedule_arch in PORTABLE_TARGETS and dev is not None and capability >= spec.compute_capability:
        return dev
    raise RuntimeError(f"a schedule lowered for {schedule_arch} cannot run on a device of compute capability "
                       f"{capability[0]}.{capability[1]}")


@dataclass(slots=True)
class Specialized:
    program: CudaProgram
    compiled: CompiledModule
    target: str
    module: Any = None  # launch.CudaModule, per device
    # scratch buffers a launch stores whole before any read (`cake.ir.overwrite`, proven on the kernel this
    # specialization generated): their init fill is dead where the allocation is exactly the declared shape
    dead_fills: frozenset[str] = frozenset()


@dataclass(eq=False)
class CudaKernel:
    """The host callable of a lowered schedule."""

    kernel: Kernel
    arch: str
    file: str = "<input>"
    cache_root: Path | None = None
    specs: dict[tuple[Any, ...], Specialized] = field(default_factory=dict)
    last: Specialized | None = None

    def __post_init__(self) -> None:
        from cake.lowering.cuda.launch import TensorMapCache

        self.inputs = [t for t in self.kernel.tensors if t.direction is not Direction.OUT]
        self.outputs = [t for t in self.kernel.tensors if t.direction is Direction.OUT]
        self.tmaps = TensorMapCache({})
        self.__name__ = self.kernel.name

    # ---------------------------------------------------------------------------------------- binding

    def bind(self, inputs: tuple[Any, ...]) -> tuple[dict[str, int], dict[str, DType]]:
        if len(inputs) != len(self.inputs):
            raise TypeError(f"`{self.kernel.name}` takes {len(self.inputs)} tensors "
                            f"({', '.join(t.name for t in self.inputs)}), got {len(inputs)}")
        dims: dict[str, int] = {}
        dtypes: dict[str, DType] = {}
        choices = {d.name: d.choices for d in self.kernel.dtype_vars}
        for decl, tensor in zip(self.inputs, inputs, strict=True):
            if tensor.dim() != len(decl.type.shape):
                raise TypeError(f"`{decl.name}` must have {len(decl.type.shape)} dims, got {tuple(tensor.shape)}")
            got = ir_dtype(tensor.dtype)
            elem = decl.type.elem
            if isinstance(elem, TypeVar):
                if got not in choices.get(elem.name, ()):
                    allowed = ", ".join(c.value for c in choices.get(elem.name, ()))
                    raise TypeError(f"{elem.name} = {tensor.dtype} (from `{decl.name}`) is not one of {{{allowed}}}")
                if dtypes.setdefault(elem.name, got) is not got:  # type: ignore[arg-type]
                    raise TypeError(f"`{decl.name}` is {tensor.dtype}, but {elem.name} = {dtypes[elem.name].value}")
            elif got is not elem:
                raise TypeError(f"`{decl.name}` must be {elem.value}, got {tensor.dtype}")
            for axis, extent in enumerate(decl.type.shape):
                size = int(tensor.shape[axis])
                if isinstance(extent, Name) and any(d.name == extent.id for d in self.kernel.dims):
                    if dims.setdefault(extent.id, size) != size:
                        raise TypeError(f"`{decl.name}` axis {axis} is {size}, but {extent.id} = {dims[extent.id]}")
        return dims, dtypes

    # ---------------------------------------------------------------------------------------- compile

    def statics(self, dims: Mapping[str, int]) -> dict[str, int]:
        return {d.name: dims[d.name] for d in self.kernel.dims if d.static}

    def specialize(self, dtypes: dict[str, DType], dims: Mapping[str, int], capability: tuple[int, int],
                   device_index: int) -> Specialized:
        statics = self.statics(dims)
        key = (tuple(sorted((k, v.value) for k, v in dtypes.items())), tuple(sorted(statics.items())), capability)
        spec = self.specs.get(key)
        if spec is None:
            spec = self.specs[key] = self.build(dtypes, statics, capability)
        if spec.module is None:
            from cake.lowering.cuda.launch import CudaModule

            spec.module = CudaModule(spec.compiled.cubin, spec.program.launches, device_index)
        self.last = spec
        return spec

    def build(self, dtypes: Mapping[str, DType], statics: Mapping[str, int], capability: tuple[int, int]) -> Specialized:
        """Generate and compile one specialization (nothing loaded on a device). Raises ShapeNotSupported when
        the kernel declines it, DiagnosticError (LoweringError, CompileError) when it cannot be built."""
        kernel = specialize_for_call(self.kernel, self.arch, dtypes, statics, self.file)
        try:
            program = generate(kernel, self.arch, dtypes=dict(dtypes), static_dims=dict(statics), file=self.file)
        except LoweringError as error:
            reason = shape_refusal(kernel, self.arch, dtypes, statics, error, self.file)
            if reason is None:
                raise
            raise ShapeNotSupported(reason) from error
        target = compile_target(self.arch, capability)
        compiled = self.compile(program, target)
        return Specialized(program, compiled, target, dead_fills=frozenset(overwritten_scratch(kernel)))

    def compile_ahead(self, calls: Sequence[tuple[Any, ...]], capability: tuple[int, int], jobs: int) -> AheadReport:
        """Build the specialization of every call (inputs on torch's `meta` device will do) into the disk cache,
        `jobs` nvcc runs at a time (`cake.lowering.ahead`). Calls the kernel cannot bind are left to their call,
        which raises the binding's error."""
        keys: dict[tuple[Any, ...], tuple[dict[str, DType], dict[str, int]]] = {}
        for inputs in calls:
            try:
                dims, dtypes = self.bind(inputs)
            except TypeError:
                continue
            statics = self.statics(dims)
            keys.setdefault((tuple(sorted((k, v.value) for k, v in dtypes.items())), tuple(sorted(statics.items()))),
                            (dtypes, statics))
        target = compile_target(self.arch, capability)

        def one(dtypes: dict[str, DType], statics: dict[str, int]) -> AheadEntry:
            name = " ".join([*(f"{k}={v.value}" for k, v in sorted(dtypes.items())),
                             *(f"{k}={v}" for k, v in sorted(statics.items())), target])
            started = time.monotonic()
            try:
                spec = self.build(dtypes, statics, capability)
            except ShapeNotSupported as why:
                return AheadEntry(name, AheadStatus.REFUSED, time.monotonic() - started, _first_line(str(why)))
            except DiagnosticError as error:  # LoweringError, CompileError, a checker refusal: located at the call
                detail = "; ".join(f"{d.code} {d.message}" for d in error.diagnostics) or str(error)
                return AheadEntry(name, AheadStatus.FAILED, time.monotonic() - started, _first_line(detail))
            status = AheadStatus.CACHED if spec.compiled.cached else AheadStatus.BUILT
            return AheadEntry(name, status, time.monotonic() - started)

        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="cake-nvcc") as pool:
            # nvcc runs in subprocesses: the threads only wait on them (codegen holds the GIL for tens of ms)
            futures = [pool.submit(one, dtypes, statics) for dtypes, statics in keys.values()]
            return AheadReport(tuple(f.result() for f in futures))

    def compile(self, program: CudaProgram, target: str) -> CompiledModule:
        smem = {c.kname: c.smem_bytes for c in program.launches}
        tmem = {c.kname: c.tmem_columns for c in program.launches}
        return compile_cubin(program.source, target, smem_dynamic_bytes=smem, tmem_columns=tmem, file=self.file,
                             cache_root=self.cache_root)

    # ------------------------------------------------------------------------------------------- call

    def __call__(self, *inputs: Any) -> Any:
        import torch
        from cake.lowering.cuda.launch import grid_dims, pack_args

        dims, dtypes = self.bind(inputs)
        device = inputs[0].device
        if device.type != "cuda":
            raise RuntimeError(f"the CUDA backend runs on CUDA tensors; `{self.inputs[0].name}` is on {device}")
        index = device.index if device.index is not None else torch.cuda.current_device()
        spec = self.specialize(dtypes, dims, torch.cuda.get_device_capability(index), index)
        boxes = tma_extents(spec.program)
        tensors: dict[str, Any] = {}
        tma_views: dict[str, Any] = {}  # what the tensor maps describe (zero-padded to whole boxes)
        for decl, t in zip(self.inputs, inputs, strict=True):
            if t.device != device:
                raise RuntimeError(f"`{decl.name}` is on {t.device}, `{self.inputs[0].name}` on {device}")
            t = t.contiguous()
            if decl.name in boxes:
                t, tma_views[decl.name] = _tma_ready(t, boxes[decl.name], arch_spec(self.arch).tma_alignment_bytes)
            tensors[decl.name] = t
        env = an.Env({**{p.name: p.default for p in self.kernel.params}, **dims}, spec.program.dtypes)
        outs = []
        for decl in self.outputs:
            shape = tuple(an.value(e, env) for e in decl.type.shape)
            out = torch.empty(shape, dtype=torch_dtype(_resolve(decl.type.elem, env)), device=device)
            tensors[decl.name] = out
            outs.append(out)
        for s in self.kernel.scratch:
            shape = tuple(an.value(e, env) for e in s.type.shape)
            full = tuple(max(n, b) for n, b in zip(shape, boxes.get(s.name, [1] * len(shape)), strict=True))
            dead_fill = s.name in spec.dead_fills and full == shape  # a TMA box beyond the shape reads padding
            buf = _scratch(full, torch_dtype(_resolve(s.type.elem, env)), _init_value(s.init, env), device,
                           dead_fill=dead_fill)
            tensors[s.name] = buf[tuple(slice(0, n) for n in shape)]
            tma_views[s.name] = buf
        stream = torch.cuda.current_stream(device).cuda_stream
        sms = torch.cuda.get_device_properties(index).multi_processor_count
        for code in spec.program.launches:
            launch = self.kernel.launch(code.launch)
            assert launch is not None
            extents = [an.value(a.extent, env) for a in launch.grid.axes]
            if any(e <= 0 for e in extents):
                continue
            persistent = launch.grid.kind is GridKind.PERSISTENT
            resident = spec.module.resident_clusters(code) if persistent and code.cluster > 1 else None
            grid = grid_dims(extents, persistent, sms, code.cluster, resident)
            args = pack_args(code.args, code.args_size, tensors, dims, self.tmaps, tma_views)
            spec.module.launch(code, grid, args, stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def resources(self) -> tuple[ResourceUsage, ...]:
        if self.last is None:
            return ()
        report = self.last.compiled.report
        return tuple(ResourceUsage(launch, k.registers, k.spill_bytes, report.smem_bytes(k.name))
                     for launch, k in _launch_reports(self.last))

    @property
    def report(self) -> ResourceReport | None:
        return None if self.last is None else self.last.compiled.report


def compiled_spills(kernel: Kernel, arch: str, dims: Mapping[str, int], dtype: DType, *,
                    file: str = "<input>") -> dict[str, float]:
    """Registers per thread each launch spills once compiled for `arch` at `dims` with every dtype variable bound to
    `dtype` (as the cost model binds them): ptxas's spill stores, 4 bytes a register, which `cake.ir.cost.predict`
    takes as `spilled_regs`. Builds the specialization, or reads it from the disk cache the evaluation's calls use.
    Raises what `CudaKernel.build` raises (ShapeNotSupported, LoweringError, CompileError)."""
    built = CudaKernel(kernel, arch, file)
    dtypes = {var.name: dtype for var in kernel.dtype_vars}
    spec = built.build(dtypes, built.statics(dims), arch_spec(arch).compute_capability)
    return {launch: k.spill_store_bytes / 4.0 for launch, k in _launch_reports(spec)}


def _launch_reports(spec: Specialized) -> list[tuple[str, KernelResources]]:
    """(launch name, ptxas's report of its __global__ function) for each compiled launch."""
    by_kernel = {c.kname: c.launch for c in spec.program.launches}
    return [(by_kernel.get(k.name, k.name), k) for k in spec.compiled.report.kernels]


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def specialize_for_call(kernel: Kernel, arch: str, dtypes: Mapping[str, DType], statics: Mapping[str, int],
                        file: str = "<input>") -> Kernel:
    """`kernel` (params already bound) run through the backend's pipeline for one call: dtype variables
    narrowed to the call's, then the checker with the call's static dims bound. A refusal that the smallest
    static dims (all 1) do not have depends on the shape, and one that the schedule's whole dtype domain does
    not have depends on the call's dtypes (E0611: a type the backend's `via dot` cannot take, a warning for the
    domain): both are the kernel declining these inputs, ShapeNotSupported. Any other refusal is the
    schedule's (DiagnosticError)."""
    ctx = LowerContext("cuda", arch, {}, file, dims=dict(statics), dtypes=dict(dtypes))
    try:
        return run_passes(kernel, PASSES, ctx)
    except DiagnosticError as error:
        reason = "; ".join(f"{d.code} {d.message}" for d in error.diagnostics if d.is_error)
        smallest = {name: 1 for name in statics}
        if statics and _accepts(kernel, arch, dtypes, smallest, file):
            shape = ", ".join(f"{name}={value}" for name, value in sorted(statics.items()))
            raise ShapeNotSupported(f"`{kernel.name}` cannot run at {shape}: {reason}") from error
        declared = {var.name: var.choices for var in kernel.dtype_vars}
        if dtypes and all(dtype in declared.get(name, ()) for name, dtype in dtypes.items()) \
                and _accepts(kernel, arch, {}, smallest, file):  # (an undeclared binding stays E0703)
            binding = ", ".join(f"{name} = {dtype.value}" for name, dtype in sorted(dtypes.items()))
            raise ShapeNotSupported(f"`{kernel.name}` cannot run with {binding}: {reason}") from error
        raise


def _accepts(kernel: Kernel, arch: str, dtypes: Mapping[str, DType], statics: Mapping[str, int], file: str) -> bool:
    """Whether the pipeline accepts `kernel` for calls with these dtypes (none: the whole domain) and static dims."""
    try:
        run_passes(kernel, PASSES, LowerContext("cuda", arch, {}, file, dims=dict(statics), dtypes=dict(dtypes)))
    except DiagnosticError:
        return False
    return True


def shape_refusal(kernel: Kernel, arch: str, dtypes: Mapping[str, DType], statics: Mapping[str, int],
                  error: LoweringError, file: str = "<input>") -> str | None:
    """Why the bound static dims cannot run (for ShapeNotSupported), or None when `error` is a real codegen
    error. The checker has already proven the declared budgets for these dims (`specialize_for_call`); what is
    left is the shared memory only codegen adds (staged mma operands, padded rows, cross-warp scratch). A
    refusal needs every diagnostic to be such an overflow (C0301) that goes away at the smallest static dims:
    an overflow already there does not depend on the shape, so it stays a compile error."""
    if not statics or not error.diagnostics or any(d.code != Code.RESOURCE.value for d in error.diagnostics):
        return None
    try:
        generate(kernel, arch, dtypes=dict(dtypes), static_dims={name: 1 for name in statics}, file=file)
    except LoweringError as smallest:
        if any(d.code == Code.RESOURCE.value for d in smallest.diagnostics):
            return None
    shape = ", ".join(f"{name}={value}" for name, value in sorted(statics.items()))
    return f"`{kernel.name}` cannot run at {shape}: " + "; ".join(d.message for d in error.diagnostics)


def _resolve(elem: Any, env: an.Env) -> DType:
    resolved = an.resolve_elem(elem, env)
    assert resolved is not None
    return resolved


def _init_value(expr: Any, env: an.Env) -> float:
    from cake.ir.nodes import FloatLit, UnaryOp, UnaryOpKind

    if isinstance(expr, FloatLit):
        return expr.value
    if isinstance(expr, UnaryOp) and expr.op is UnaryOpKind.NEG and isinstance(expr.operand, FloatLit):
        return -expr.operand.value
    return float(an.value(expr, env))


def _scratch(shape: tuple[int, ...], dtype: Any, init: float, device: Any, *, dead_fill: bool = False) -> Any:
    """A scratch buffer whose rows are padded to 16 bytes, so TMA can address it whatever its width.

    It is filled with `init`, unless `dead_fill` (a launch stores every element of `shape` before any read)
    and no row padding was needed: the kernels never write padding, so a padded buffer keeps its fill, as
    the exported runtime does (`cake.export.runtime._kernels`)."""
    import torch

    esize = torch.empty((), dtype=dtype).element_size()
    inner = shape[-1]
    per = max(1, 16 // esize)
    padded = -(-inner // per) * per
    if dead_fill and padded == inner:
        return torch.empty(shape, dtype=dtype, device=device)
    buf = torch.full((*shape[:-1], padded), init, dtype=dtype, device=device)
    return buf[..., :inner]


def tma_extents(program: CudaProgram) -> dict[str, list[int]]:
    """Per tensor read through TMA, the least extent of each dim (outermost first) that holds a whole box."""
    need: dict[str, list[int]] = {}
    for code in program.launches:
        for f in code.args:
            if f.tma is not None:
                box = list(reversed(f.tma.box))
                have = need.setdefault(f.tma.tensor, [1] * len(box))
                need[f.tma.tensor] = [max(a, b) for a, b in zip(have, box, strict=True)]
    return need


def _tma_ready(t: Any, box_extents: list[int], align: int) -> tuple[Any, Any]:
    """(the tensor the kernel indexes, the tensor its TMA maps describe). When TMA cannot address `t` as it
    is (rows not 16-byte aligned) or a box is larger than a dim, both become views of a zero-padded copy: the
    padding holds the zeros a box would read out of bounds anyway, so the copy changes no result."""
    import torch

    esize = t.element_size()
    per = max(1, align // esize)
    full = [max(n, b) for n, b in zip(t.shape, box_extents, strict=True)]
    full[-1] = -(-full[-1] // per) * per
    strides_ok = all((t.stride(i) * esize) % align == 0 for i in range(t.dim() - 1))
    if strides_ok and t.data_ptr() % align == 0 and all(n >= b for n, b in zip(t.shape, box_extents, strict=True)):
        return t, t
    buf = torch.zeros(full, dtype=t.dtype, device=t.device)
    logical = tuple(slice(0, n) for n in t.shape)
    buf[logical] = t
    return buf[logical], buf[tuple(slice(0, max(n, b)) for n, b in zip(t.shape, box_extents, strict=True))]


class CudaBackend:
    name = "cuda"
    codegen_version = CODEGEN_VERSION
    source_suffix = ".cu"

    @property
    def passes(self) -> tuple[Pass, ...]:
        return PASSES

    def emit(self, kernel: Kernel, ctx: LowerContext) -> EmitResult:
        program = generate(kernel, ctx.arch, file=ctx.filename)
        launches = tuple(LaunchInfo(c.launch, c.kname, c.threads // THREADS_PER_WARP, c.persistent, c.regs_cap)
                         for c in program.launches)
        from cake.ir.printer import print_kernel

        return EmitResult(program.source, kernel.name, launches, source_map(program.source),
                          artifacts=((SCHEDULE_ARTIFACT, print_kernel(kernel)),))

    def toolchain(self) -> dict[str, str]:
        return {"nvcc": nvcc_version(), "torch": importlib.metadata.version("torch")}

    def load(self, lowered: LoweredKernel, cache: KernelCache) -> Callable[..., Any]:
        kernel = specialized_kernel(lowered)
        cache.write_text(lowered.key, f"{lowered.schedule}{self.source_suffix}", lowered.source)
        return CudaKernel(kernel, lowered.arch, lowered.filename, cache.root / "cuda")

    def compile_errors(self) -> tuple[type[BaseException], ...]:
        return (CompileError, LoweringError)

    def diagnose(self, lowered: LoweredKernel, error: BaseException) -> Diagnostic:
        if isinstance(error, DiagnosticError) and error.diagnostics:
            first = error.diagnostics[0]
            notes = tuple(f"{d.code}: {d.message}" for d in error.diagnostics[1:4])
            return Diagnostic(codes.COMPILE_ERROR, first.message, span=first.span, file=lowered.filename,
                              subject=lowered.schedule, notes=(*first.notes, *notes),
                              help="`cake lower --backend cuda` shows the generated source")
        return Diagnostic(codes.COMPILE_ERROR, f"the CUDA backend failed: {error}", file=lowered.filename,
                          subject=lowered.schedule)

    def resources(self, fn: Callable[..., Any]) -> tuple[ResourceUsage, ...]:
        return fn.resources() if isinstance(fn, CudaKernel) else ()


def specialized_kernel(lowered: LoweredKernel) -> Kernel:
    """The schedule with the lowered param assignment, parsed from its text (keeping its spans)."""
    from cake.ir.parser import parse

    if lowered.schedule_text is None:  # the printed specialized IR (spans then point into that text)
        return parse(dict(lowered.artifacts)[SCHEDULE_ARTIFACT], lowered.filename)
    kernel = parse(lowered.schedule_text, lowered.filename)
    return bind_params(kernel, LowerContext("cuda", lowered.arch, dict(lowered.params), lowered.filename))
