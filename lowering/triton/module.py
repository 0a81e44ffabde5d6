"""The generated Python module: imports, bound params, a small prelude of host helpers, one `@triton.jit`
function per launch, and the host launcher with the op's signature.

The launcher binds dims from the input shapes and each dtype variable from the inputs declared with it
(checking that they agree), allocates outputs (`torch.empty`) and scratch (`torch.full` with its init, or
`torch.empty` where `cake.ir.overwrite` proves that a launch stores the whole buffer before any launch reads it:
the fill is dead work, a fill kernel per buffer and call on a GPU), computes each launch's grid, launches in
order and returns the outputs. The module needs only torch and triton, so `cake lower -o kernel.py` is a
self-contained file.

Outputs and workspace. `launcher(*inputs, out=None, workspace=None)`: both keywords are optional, and a call
without them is the functional call above.
- `out=` the output tensors to write instead of allocating them: the tensor for a schedule with one `out` tensor,
  a tuple (or list) in declaration order for several; the launcher returns them. Each must be what the launcher
  would allocate (dtype, device, shape for these inputs: TypeError for a dtype, ValueError otherwise, naming the
  output), in any layout whose elements are distinct (the kernels address every tensor through its runtime
  strides, so a transposed tensor or a window of a larger buffer is written in place; an expanded one, whose
  elements share memory, is refused). A schedule without `out` tensors (its `inout` tensors are written in
  place) refuses `out=`.
- `workspace=` uint8 memory for the scratch buffers, instead of allocating them: contiguous, on the inputs'
  device, at least `launcher.workspace_bytes(*inputs)` bytes from a POINTER_ALIGN_BYTES-aligned start (`host_prelude`). Each
  buffer is a view at the next WORKSPACE_ALIGN_BYTES boundary after the previous one (`_k_workspace_layout`:
  the one rule the launcher carves by and `workspace_bytes` sizes by), filled with its init unless the fill is
  dead, exactly as an allocation would be. Its bytes are scratch: any content on entry, garbage after.
- Neither may overlap an input (nor an output another output or the workspace's scratch bytes): refused by
  address on every call, before any byte is written. A refused call leaves no plan.
Fills are the scratch's: an `out` tensor has no declared init (the grammar gives one to scratch only), so a
given output, like an allocated one, is what the launches store.

Call plans. All of that host work is a function of the call signature (each input's shape, strides, dtype,
device and 16-byte pointer alignment, the same of the `out=` tensors and the workspace when given, and the
current CUDA device), and on a slow host it costs more than the kernels: the update's six launches took
~0.3-0.5 ms of host time at B = 1 on the H200's host against 0.23 ms of kernels, so every call made with an idle
GPU measured the host. So the launcher records its first call at each signature (`_KRecorder`: the caller's
tensors, the allocations with their fills, the workspace views, each launch with its grid and arguments, tensors
as slots) and replays that record at later calls (`_KPlan`): one key and one dict lookup, the address checks
of a call given `out=` or `workspace=`, the allocations or the workspace's buffers (their addresses where every
launch is direct: `_KPlan`), and each launch straight through the `CompiledKernel` Triton's JIT returned for it
(`compiled[grid](*every parameter, stream=...)`: since Triton 3.3 the JIT hands its launcher every parameter in
order, constexprs included; before that the replay goes through the JIT). Given tensors are tagged in the key, so a call that gives its outputs never replays a plan that
allocates them, nor the reverse. What the replay skips is what cannot change at a signature: the checks, dim
binding, grids, strides, constexpr flags and the JIT's binder and cache lookup. A launch function swapped in
the module since (`aot.record_launches`' recorder) is launched as it is now, through its `[grid]`. torch.compile's
tracing tensors (FakeTensor, FunctionalTensor: an exported `triton_op`'s body is traced) get no plan and no
address checks, and each launch given one goes through torch's `wrap_triton` (`_k_traceable`), which makes it a
`triton_kernel_wrapper_*` node of the traced graph; real tensors launch the JIT's kernels as they are.
`CAKE_TRITON_PLANS=0` at import turns plans off (measurements only).
"""

from __future__ import annotations

from dataclasses import dataclass

from cake.ir.nodes import (
    BinOp,
    Call,
    Direction,
    DType,
    Expr,
    FloatLit,
    IntLit,
    Kernel,
    Name,
    SizeOf,
    TensorDecl,
    TypeVar,
    UnaryOp,
    UnaryOpKind,
)
from cake.ir.overwrite import overwritten_scratch
from cake.ir.visit import walk
from cake.lowering import codes
from cake.lowering.lowered import EmitResult, SourceMap
from cake.lowering.triton.host_prelude import (
    CALL_PLAN_CONSTANTS,
    CALL_PLAN_PRELUDE,
    PRELUDE,
    RANK_EQUAL_PRELUDE,
    WORKSPACE_ALIGN_BYTES,
)
from cake.lowering.triton.kernel_fn import LaunchCode, emit_launch
from cake.lowering.triton.names import OUT_KEYWORD, WORKSPACE_KEYWORD
from cake.lowering.triton.symbols import Symbols
from cake.lowering.triton.values import TORCH_DTYPES, float_text

from cake.diagnostics import Diagnostic, DiagnosticError, Span


@dataclass(frozen=True, slots=True)
class _Host:
    """Host-side names: the launcher's locals (dims, dtype variables) and module constants (params)."""

    symbols: Symbols
    filename: str

    def expr(self, e: Expr, span: Span | None = None) -> str:
        if isinstance(e, IntLit):
            return str(e.value)
        if isinstance(e, Name):
            if e.id in self.symbols.dims:
                return self.symbols.dims[e.id].code
            if e.id in self.symbols.params:
                return self.symbols.params[e.id].code
        if isinstance(e, BinOp) and not e.op.is_comparison:
            op = {"/": "//"}.get(e.op.value, e.op.value)  # sizes are integers
            return f"({self.expr(e.lhs, span)} {op} {self.expr(e.rhs, span)})"
        if isinstance(e, Call) and e.func == "cdiv" and len(e.args) == 2:
            return f"_k_cdiv({self.expr(e.args[0], span)}, {self.expr(e.args[1], span)})"
        if isinstance(e, SizeOf):
            if isinstance(e.elem, DType):
                return str(e.elem.bytes)
            return f"{self.symbols.typevars[e.elem.name].code}.itemsize"
        raise DiagnosticError([Diagnostic(codes.HOST_BINDING, "the launcher cannot compute this size on the host",
                                          span=getattr(e, "span", None) or span, file=self.filename,
                                          help="sizes are dims, params, literals, + - * // and cdiv")])

    def value(self, e: Expr) -> str:
        """A scratch buffer's fill value."""
        if isinstance(e, FloatLit):
            return float_text(e.value)
        if isinstance(e, UnaryOp) and e.op is UnaryOpKind.NEG and isinstance(e.operand, FloatLit):
            return float_text(-e.operand.value)
        return self.expr(e)

    def torch_dtype(self, elem: DType | TypeVar) -> str:
        return TORCH_DTYPES[elem] if isinstance(elem, DType) else self.symbols.typevars[elem.name].code


def emit_module(kernel: Kernel, arch: str, filename: str) -> EmitResult:
    symbols = Symbols(kernel)
    launches = [emit_launch(kernel, launch, symbols, filename) for launch in kernel.launches]
    host = _Host(symbols, filename)
    entry = symbols.namer.user(kernel.name)
    lines: list[str] = []
    spans: list[tuple[int, Span]] = []
    params = ", ".join(f"{p.name}={p.value}" for p in symbols.params.values()) or "none"
    lines += [f'"""Generated by CAKE from schedule `{kernel.name}` (op {kernel.op}) for the Triton backend, '
              f'target {arch}.', "", f"params: {params}", f"call: {_signature(kernel, entry)}", '"""', "",
              "import math", "import os", "", "import torch", "import triton", "import triton.language as tl", ""]
    if symbols.params:
        lines.append("# params, bound at lowering (passed to every kernel as tl.constexpr)")
        lines += [f"{p.code} = {p.value}" for p in symbols.params.values()]
    lines += PRELUDE.rstrip("\n").split("\n")
    lines += CALL_PLAN_CONSTANTS.rstrip("\n").split("\n")
    lines += CALL_PLAN_PRELUDE.rstrip("\n").split("\n")
    if any(isinstance(node, Call) and node.func == "rank_equal" for node in walk(kernel)):
        lines += RANK_EQUAL_PRELUDE.rstrip("\n").split("\n")
    for code in launches:
        lines += ["", "", *code.header]
        body, body_spans = code.body.render(len(lines) + 1)
        lines += body
        spans += body_spans
    lines += ["", ""]
    launcher, launcher_spans = _launcher(kernel, symbols, host, launches, entry, len(lines) + 1)
    lines += launcher
    spans += launcher_spans
    return EmitResult(source="\n".join(lines) + "\n", entry=entry, launches=tuple(c.info for c in launches),
                      source_map=SourceMap(tuple(sorted(spans, key=lambda s: s[0]))))


def _signature(kernel: Kernel, entry: str) -> str:
    def show(t: object) -> str:
        decl = t.type  # type: ignore[attr-defined]
        elem = decl.elem.value if isinstance(decl.elem, DType) else decl.elem.name
        return f"{t.name}: {elem}[{', '.join(_text(s) for s in decl.shape)}]"  # type: ignore[attr-defined]

    ins = [t for t in kernel.tensors if t.direction is not Direction.OUT]
    outs = [t for t in kernel.tensors if t.direction is Direction.OUT] or [
        t for t in kernel.tensors if t.direction is Direction.INOUT]
    return f"{entry}({', '.join(show(t) for t in ins)}) -> {', '.join(show(t) for t in outs)}"


def _text(e: Expr) -> str:
    if isinstance(e, Name):
        return e.id
    if isinstance(e, IntLit):
        return str(e.value)
    return "…"


class _HostCode:
    """Lines of a host function, each generated line that stands for a declaration mapped to its span."""

    def __init__(self, first_line: int, lines: list[str] | None = None):
        self.first_line = first_line
        self.out: list[str] = lines or []
        self.spans: list[tuple[int, Span]] = []

    def line(self, text: str, span: Span | None = None) -> None:
        if span is not None:
            self.spans.append((self.first_line + len(self.out), span))
        self.out.append("    " + text)


def _launcher(kernel: Kernel, symbols: Symbols, host: _Host, launches: list[LaunchCode], entry: str,
              first_line: int) -> tuple[list[str], list[tuple[int, Span]]]:
    ins = [t for t in kernel.tensors if t.direction is not Direction.OUT]
    outs = [t for t in kernel.tensors if t.direction is Direction.OUT]
    returned = outs or [t for t in kernel.tensors if t.direction is Direction.INOUT]
    _check_bindable(kernel, ins, host.filename)
    var = {name: t.host for name, t in symbols.tensors.items()}
    device, grid = symbols.namer.claim("device"), symbols.namer.claim("grid")
    sizer = symbols.namer.claim(f"{entry}_workspace_bytes")
    params = ", ".join(var[t.name] for t in ins)
    if len(outs) == 1:
        given = f"the output tensor to write (`{outs[0].name}`) instead of allocating it"
    elif outs:
        given = f"a tuple of the output tensors to write ({', '.join(f'`{t.name}`' for t in outs)}) instead of allocating them"
    else:
        given = "none: this schedule's `inout` tensors are written in place"
    code = _HostCode(first_line, [
        f"def {entry}({params}, *, {OUT_KEYWORD}=None, {WORKSPACE_KEYWORD}=None):",
        f'    """{kernel.op}: {_signature(kernel, entry)}',
        "",
        f"    {OUT_KEYWORD}=: {given};",
        f"    {WORKSPACE_KEYWORD}=: uint8, `{entry}.workspace_bytes(*inputs)` bytes at a 16-byte aligned address, "
        "where the",
        '    scratch buffers go instead of allocations. Returns the outputs either way."""'])
    line = code.line
    names = [t.name for t in ins]
    inputs = _tuple(var[n] for n in names)
    # A call signature seen before replays its plan; the first one checks, allocates, launches and records.
    line(f"_k_key = _k_signature({inputs}, {OUT_KEYWORD}, {WORKSPACE_KEYWORD})")
    line("_k_plan = None if _k_key is None else _k_plans.get(_k_key)")
    line("if _k_plan is not None:")
    line(f"    return _k_plan.run({inputs}, {OUT_KEYWORD}, {WORKSPACE_KEYWORD})")
    line(f"_k_rec = _KRecorder({inputs}, {_tuple(map(repr, names))}, {OUT_KEYWORD}, "
         f"{_tuple(repr(t.name) for t in outs) if outs else '()'}, {WORKSPACE_KEYWORD}, {entry!r})")
    _bind_inputs(kernel, symbols, host, ins, device, code)
    for index, t in enumerate(outs):
        shape = _tuple(host.expr(s, t.span) for s in t.type.shape)
        line(f"{var[t.name]} = _k_rec.output({index}, {shape}, {host.torch_dtype(t.type.elem)}, {device})", t.span)
    _scratch_specs(kernel, symbols, host, code, f"_k_rec.scratch({device}, ")
    for launch_code, launch in zip(launches, kernel.launches, strict=True):
        tiles = " * ".join(host.expr(e) for e in launch_code.grid_extents)  # type: ignore[arg-type]
        count = f"_k_programs({device}, {tiles})" if launch_code.info.persistent else tiles
        line(f"{grid} = ({count},)", launch.grid.span)
        line(f"if {grid}[0] > 0:")
        items = [a.host for a in launch_code.args if not a.constexpr]
        items += [f"{a.name}={a.host}" for a in launch_code.args if a.constexpr]
        items.append(f"num_warps={launch_code.info.num_warps}")
        if launch_code.info.num_stages is not None:
            items.append(f"num_stages={launch_code.info.num_stages}")
        if launch_code.info.max_registers is not None:
            items.append(f"maxnreg={launch_code.info.max_registers}")
        line(f"    _k_compiled[{launch.name!r}] = _k_rec.launch(", launch.span)
        line(f"        {launch_code.info.function!r}, {launch_code.info.function}, {grid},")
        for item in items:
            line(f"        {item},")
        line("    )")
    line("if _k_key is not None:")
    line(f"    _k_plans[_k_key] = _k_rec.plan({_tuple(var[t.name] for t in returned)})")
    line(f"return {', '.join(var[t.name] for t in returned)}")
    # The workspace's size: the same bindings and scratch specs, through the same layout rule.
    sizing = _HostCode(first_line + len(code.out), [
        "", "", f"def {sizer}({params}):",
        f'    """The bytes of `{WORKSPACE_KEYWORD}=` that `{entry}` takes at these inputs: its scratch buffers, each at '
        f'the next',
        f'    {WORKSPACE_ALIGN_BYTES}-byte boundary (`_k_workspace_layout`); 0 when it has none."""'])
    _bind_inputs(kernel, symbols, host, ins, device, sizing)
    _scratch_specs(kernel, symbols, host, sizing, "_k_workspace_layout(", target=False, suffix="[1]")
    sizing.out += ["", "", f"{entry}.workspace_bytes = {sizer}"]
    return code.out + sizing.out, code.spans + sizing.spans


def _bind_inputs(kernel: Kernel, symbols: Symbols, host: _Host, ins: list[TensorDecl], device: str,
                 code: _HostCode) -> None:
    """Check the inputs and bind the device, the dims and the dtype variables from them."""
    line, var = code.line, {name: t.host for name, t in symbols.tensors.items()}
    names = [t.name for t in ins]
    line(f"{device} = _k_device({_tuple(map(repr, names))}, {_tuple(var[n] for n in names)})")
    if kernel.dims:
        specs = _tuple(_tuple([var[t.name], repr(t.name), _tuple(map(_dim_spec, t.type.shape))]) for t in ins)
        bound = ", ".join(symbols.dims[d.name].code for d in kernel.dims)
        bound += "," if len(kernel.dims) == 1 else ""
        line(f"{bound} = _k_dims({specs}, {_tuple(repr(d.name) for d in kernel.dims)})")
    for t in ins:
        for axis, extent in enumerate(t.type.shape):
            if _dim_spec(extent) == "None":
                line(f"if {var[t.name]}.shape[{axis}] != {host.expr(extent)}:", t.span)
                line(f"    raise ValueError('`{t.name}` dim {axis} does not match its declared size')")
    for dvar in kernel.dtype_vars:
        users = [t for t in ins if isinstance(t.type.elem, TypeVar) and t.type.elem.name == dvar.name]
        if users:
            allowed = _tuple(TORCH_DTYPES[c] for c in dvar.choices)
            pairs = _tuple(_tuple([var[t.name], repr(t.name)]) for t in users)
            line(f"{symbols.typevars[dvar.name].code} = _k_dtype({dvar.name!r}, {pairs}, {allowed})", dvar.span)
    for t in ins:
        if isinstance(t.type.elem, DType):
            line(f"_k_expect_dtype({var[t.name]}, {t.name!r}, {TORCH_DTYPES[t.type.elem]})", t.span)


def _scratch_specs(kernel: Kernel, symbols: Symbols, host: _Host, code: _HostCode, call: str, target: bool = True,
                   suffix: str = "") -> None:
    """`call` over the scratch buffers' specs, one (name, shape, dtype, fill) per line (fill None where
    `cake.ir.overwrite` proves it dead): the launcher's `_k_rec.scratch`, assigned to the buffers' names, or the
    workspace's size, returned."""
    dead_fills = overwritten_scratch(kernel)
    names = [symbols.tensors[s.name].host for s in kernel.scratch]
    head = "return " if not target else f"{names[0]}, = " if len(names) == 1 else \
        f"{', '.join(names)} = " if names else ""
    if not kernel.scratch:
        code.line(f"{head}{call}()){suffix}")
        return
    code.line(f"{head}{call}(")
    for s in kernel.scratch:
        shape = _tuple(host.expr(x, s.span) for x in s.type.shape)
        elem = host.torch_dtype(s.type.elem)
        if s.name in dead_fills:  # the allocation is exactly the declared shape, which the proof covers
            code.line(f"    # `{s.name}`: launch `{dead_fills[s.name]}` stores all of it before any read; its init "
                      "fill is dead")
            code.line(f"    ({s.name!r}, {shape}, {elem}, None),", s.span)
        else:
            code.line(f"    ({s.name!r}, {shape}, {elem}, {host.value(s.init)}),", s.span)
    code.line(f")){suffix}")


def _tuple(items: object) -> str:
    parts = list(items)  # type: ignore[call-overload]
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


def _dim_spec(extent: Expr) -> str:
    if isinstance(extent, Name):
        return repr(extent.id)
    if isinstance(extent, IntLit):
        return str(extent.value)
    return "None"


def _check_bindable(kernel: Kernel, ins: list[TensorDecl], filename: str) -> None:
    bound = {s.id for t in ins for s in t.type.shape if isinstance(s, Name)}
    found = [Diagnostic(codes.HOST_BINDING, f"dim `{d.name}` is not the size of any input tensor's dim, so the "
                        "launcher cannot bind it", span=d.span, file=filename, subject=d.name)
             for d in kernel.dims if d.name not in bound]
    if found:
        raise DiagnosticError(found)
