"""Expressions to `triton.language`: one emit rule per node type (builtin calls: `calls.CALL_RULES`).

Each rule returns a `Val` (source text, element type, tile axes). Loads hoist their pointer and mask
arithmetic into named temporaries (`offs0`, `ptrs1`, `mask2`, `ld3`); everything else stays inline, so a
schedule line maps to a few readable lines of Triton.
"""

from __future__ import annotations

from collections.abc import Callable

from cake.ir.analysis import Unbound, value
from cake.ir.dot_forms import dot_precision
from cake.ir.nodes import (
    BinOp,
    BinOpKind,
    BoolLit,
    Call,
    DType,
    Expr,
    FloatLit,
    Index,
    IntLit,
    Load,
    Mma,
    Name,
    NewAxis,
    SizeOf,
    Slice,
    Transpose,
    TypeVar,
    UnaryOp,
    UnaryOpKind,
)
from cake.lowering.triton import access
from cake.lowering.triton.extremes import ExtremePairs
from cake.lowering.triton.fn import FnBuilder, Scope
from cake.lowering.triton.symbols import Symbols
from cake.lowering.triton.values import (
    MIN_DOT_EXTENT,
    PREC_ADD,
    PREC_AND,
    PREC_CMP,
    PREC_MUL,
    PREC_OR,
    PREC_UNARY,
    TL_DTYPES,
    Axis,
    Elem,
    Lit,
    Pad,
    Val,
    broadcast,
    expand,
    float_text,
    next_pow2,
    promote,
)

from cake.diagnostics import DiagnosticError

_PREC = {
    BinOpKind.ADD: PREC_ADD, BinOpKind.SUB: PREC_ADD,
    BinOpKind.MUL: PREC_MUL, BinOpKind.DIV: PREC_MUL, BinOpKind.FLOORDIV: PREC_MUL, BinOpKind.MOD: PREC_MUL,
    BinOpKind.AND: PREC_AND, BinOpKind.OR: PREC_OR,
}
# The mma forms this backend emits (as tl.dot; Triton picks the instruction): each `via dot` precision suffix
# (cake.ir.dot_forms) -> tl.dot's input_precision for fp32 operands. `ieee`: full fp32 products (CUDA cores);
# `tf32x3`: Triton's three-TF32-product split on the tensor cores; `tf32`: one TF32 product. fp16/bf16 operands
# ignore the option.
TRITON_DOT_PRECISION = {"": "ieee", "tf32x3": "tf32x3", "tf32": "tf32"}


class ExprEmitter:
    """Emits expressions of one generated function. `scope` changes as statements enter loops."""

    def __init__(self, symbols: Symbols, fn: FnBuilder, scope: Scope):
        self.symbols = symbols
        self.fn = fn
        self.scope = scope
        # What the function's signature must include (filled as names are emitted).
        self.used_tensors: set[str] = set()
        self.used_dims: set[str] = set()
        self.used_params: set[str] = set()
        self.used_typevars: set[str] = set()
        self.extremes = ExtremePairs()  # min/argmin pairs of the block being emitted, fused into one reduction
        # Names some `Assign` rebinds in the launch: what a `let` knows of its value (zero padding) may not last.
        self.reassigned: frozenset[str] = frozenset()
        # The launch's `num_stages` (kernel_fn): its pipelined loops' common stage count, None if they disagree.
        self.launch_stages: int | None = None

    def bind_typevars(self) -> None:
        """Prologue lines binding each dtype variable used to the element type of a tensor argument
        declared with it (one the function already takes, when there is one)."""
        for name in sorted(self.used_typevars):
            var = self.symbols.typevars[name]
            typed = [t for t in self.symbols.tensors.values()
                     if isinstance(t.elem, TypeVar) and t.elem.name == name]
            source = next((t for t in typed if t.name in self.used_tensors), None) or typed[0]
            self.used_tensors.add(source.name)
            self.fn.hoist(var.code, f"{source.ptr}.dtype.element_ty")

    # --------------------------------------------------------------------------------------- helpers

    def emit(self, expr: Expr) -> Val:
        rule = _RULES.get(type(expr))
        if rule is None:
            raise self.fn.unsupported(f"the Triton backend cannot express `{type(expr).__name__}` here",
                                      getattr(expr, "span", None))
        return rule(self, expr)

    def error(self, message: str, node: object, help: str | None = None) -> DiagnosticError:
        return self.fn.unsupported(message, getattr(node, "span", None), help=help)

    def elem_code(self, elem: Elem | TypeVar) -> str:
        """A dtype as kernel source: `tl.float32`, or the local bound to a dtype variable."""
        if isinstance(elem, TypeVar):
            elem = elem.name
        if isinstance(elem, DType):
            return TL_DTYPES[elem]
        var = self.symbols.typevars.get(elem)
        if var is None or var.source is None:
            raise self.fn.unsupported(f"dtype variable `{elem}` is not the type of any tensor", None)
        self.used_typevars.add(elem)  # bound in the prologue from a pointer's element type
        return var.code

    def maybe_16bit(self, dtype: Elem | None) -> bool:
        """Whether values of `dtype` may be 16-bit floats (Triton's math and reductions want fp32)."""
        if dtype is None:
            return True
        if isinstance(dtype, DType):
            return dtype in (DType.F16, DType.BF16)
        var = self.symbols.typevars.get(dtype)
        return var is None or var.may_be_16bit

    def to(self, val: Val, elem: Elem) -> Val:
        """`val` converted to `elem` (no conversion when the emitter knows it already is)."""
        if val.dtype == elem and val.lit is None:
            return val
        if not val.axes:  # a scalar may be a Python value: Triton's JIT turns an integer argument of 1 into one
            return Val(f"tl.cast({val.code}, {self.elem_code(elem)})", elem)
        return Val(f"{val.atom()}.to({self.elem_code(elem)})", elem, val.axes, zero_pad=val.zero_pad)

    def named(self, val: Val, prefix: str) -> Val:
        """`val` as a plain name (hoisted into a temporary unless it already is one)."""
        if val.code.isidentifier():
            return val
        return Val(self.fn.assign_temp(prefix, val.code), val.dtype, val.axes, val.lit, zero_pad=val.zero_pad)

    def axis_of(self, extent: Expr) -> Axis:
        """The tile axis of a compile-time extent: a static dim, or params and literals."""
        if isinstance(extent, Name) and extent.id in self.symbols.dims and self.symbols.dims[extent.id].static:
            dim = self.symbols.dims[extent.id]
            self.used_dims.add(dim.name)
            assert dim.p2 is not None
            return Axis(dim.code, dim.p2, Pad.STATIC)
        try:
            size = value(extent, self.symbols.env)
        except Unbound as unbound:
            raise self.error(f"tile extent depends on {unbound}, which is not known at compile time", extent,
                             help="tile extents are params, literals, or a `static` dim") from None
        if size < 1:
            raise self.error(f"tile extent is {size}; a tile needs at least one element", extent)
        text = self.emit(extent).code
        physical = next_pow2(size)
        if physical == size:
            return Axis(text, text, Pad.NONE, size)
        return Axis(text, str(physical), Pad.ALWAYS, physical)

    def without_padding(self, val: Val, axis: int, identity: str) -> Val:
        """`val` with the padding lanes of axis `axis` replaced by `identity` (for reductions and mma)."""
        ax = val.axes[axis]
        if ax.pad is Pad.NONE or (val.zero_pad and identity == "0"):
            return val
        val = self.named(val, "v")
        mask = expand(self.fn.pad_mask(ax), axis, 1, len(val.axes))
        masked = f"tl.where({mask}, {val.code}, {identity})"
        code = masked if ax.pad is Pad.ALWAYS else f"{masked} if {ax.padded_if} else {val.code}"
        return Val(self.fn.assign_temp("v", code), val.dtype, val.axes)

    def args(self, call: Call, count: int) -> list[Val]:
        if len(call.args) != count:
            raise self.error(f"`{call.func}` takes {count} argument(s), got {len(call.args)}", call)
        return [self.emit(a) for a in call.args]

    def axis_kw(self, call: Call, rank: int) -> int | None:
        for kw in call.kwargs:
            if kw.name == "axis":
                if not isinstance(kw.value, IntLit) and not (isinstance(kw.value, UnaryOp)
                                                             and isinstance(kw.value.operand, IntLit)):
                    raise self.error("`axis` must be an integer literal", kw)
                axis = value(kw.value, self.symbols.env)
                if not -rank <= axis < rank:
                    raise self.error(f"axis {axis} is out of range for a rank-{rank} tile", kw)
                return axis % rank
            raise self.error(f"`{call.func}` has no keyword `{kw.name}`", kw)
        return None


# ------------------------------------------------------------------------------------------- node rules


def _int_lit(em: ExprEmitter, e: IntLit) -> Val:
    return Val(str(e.value), None, lit=Lit.INT)


def _float_lit(em: ExprEmitter, e: FloatLit) -> Val:
    return Val(float_text(e.value), None, lit=Lit.FLOAT)


def _bool_lit(em: ExprEmitter, e: BoolLit) -> Val:
    return Val(str(e.value), None, lit=Lit.BOOL)


def _name(em: ExprEmitter, e: Name) -> Val:
    var = em.scope.lookup(e.id)
    if var is not None:
        return var.val()
    sym = em.symbols
    if e.id in sym.params:
        em.used_params.add(e.id)
        return Val(sym.params[e.id].code, None, lit=Lit.INT)
    if e.id in sym.dims:
        dim = sym.dims[e.id]
        em.used_dims.add(e.id)
        return Val(dim.code, None, lit=Lit.INT) if dim.static else Val(dim.code, DType.I32)
    if e.id in sym.tensors:
        raise em.error(f"`{e.id}` is a global tensor: read it with `load {e.id}[...]`", e)
    raise em.error(f"`{e.id}` is not defined here", e)


def _binop(em: ExprEmitter, e: BinOp) -> Val:
    a, b = em.emit(e.lhs), em.emit(e.rhs)
    axes = broadcast(a.axes, b.axes)
    if e.op.is_comparison:
        code = f"{a.operand(PREC_CMP)} {e.op.value} {b.operand(PREC_CMP, right=True)}"
        both_lit = a.lit is not None and b.lit is not None
        return Val(code, None if both_lit else DType.BOOL, axes, Lit.BOOL if both_lit else None, PREC_CMP)
    prec = _PREC[e.op]
    code = f"{a.operand(prec)} {e.op.value} {b.operand(prec, right=True)}"
    dtype, lit = promote(a, b, em.symbols.float_vars)
    if e.op is BinOpKind.DIV:  # true division: integers divide as fp32 (as in Triton)
        if lit is Lit.INT:
            lit = Lit.FLOAT
        elif isinstance(dtype, DType) and not dtype.is_float:
            dtype = DType.F32
    # 0 + 0, 0 - 0 and 0 * 0 are 0: lanes padded alike in both operands stay zero (not so under broadcasting,
    # where a padding lane meets a real value, nor for division: 0 / 0 is NaN).
    zero = a.zero_pad and b.zero_pad and a.axes == b.axes and e.op in _ZERO_KEEPING
    return Val(code, dtype, axes, lit, prec, zero_pad=zero)


_ZERO_KEEPING = frozenset({BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL})


def _unary(em: ExprEmitter, e: UnaryOp) -> Val:
    if e.op is UnaryOpKind.NEG:
        if isinstance(e.operand, FloatLit):
            return Val(float_text(-e.operand.value), None, lit=Lit.FLOAT)
        x = em.emit(e.operand)
        return Val(f"-{x.operand(PREC_UNARY)}", x.dtype, x.axes, x.lit, PREC_UNARY)
    x = em.emit(e.operand)
    if x.dtype == DType.BOOL:
        return Val(f"~{x.operand(PREC_UNARY)}", DType.BOOL, x.axes, prec=PREC_UNARY)
    if x.lit is not None:
        return Val(f"not {x.operand(PREC_UNARY)}", None, lit=Lit.BOOL, prec=PREC_CMP - 1)
    return Val(f"{x.operand(PREC_CMP)} == 0", DType.BOOL, x.axes, prec=PREC_CMP)


def _index(em: ExprEmitter, e: Index) -> Val:
    if isinstance(e.base, Name) and e.base.id in em.symbols.tensors:
        raise em.error(f"`{e.base.id}` is a global tensor: read it with `load {e.base.id}[...]`", e)
    base = em.emit(e.base)
    items: list[str] = []
    axes: list[Axis] = []
    k = 0
    for item in e.items:
        if isinstance(item, NewAxis):
            items.append("None")
            axes.append(Axis("1", "1", Pad.NONE, 1))
        elif isinstance(item, Slice) and item.start is None and item.size is None and k < len(base.axes):
            items.append(":")
            axes.append(base.axes[k])
            k += 1
        else:
            raise em.error("a register tile can only be broadcast (`v[:, None]`); selecting part of it is not "
                           "expressible in Triton", item if hasattr(item, "span") else e)
    if k != len(base.axes):
        raise em.error(f"the index has {k} `:` item(s) for a rank-{len(base.axes)} tile", e)
    return Val(f"{base.atom()}[{', '.join(items)}]", base.dtype, tuple(axes), base.lit, zero_pad=base.zero_pad)


def _transpose(em: ExprEmitter, e: Transpose) -> Val:
    x = em.emit(e.operand)
    if len(x.axes) != 2:
        raise em.error(f"`.T` needs a 2-D tile, got rank {len(x.axes)}", e)
    return Val(f"tl.trans({x.code})", x.dtype, x.axes[::-1], zero_pad=x.zero_pad)


def _sizeof(em: ExprEmitter, e: SizeOf) -> Val:
    if isinstance(e.elem, DType):
        return Val(str(e.elem.bytes), None, lit=Lit.INT)
    return Val(f"{em.elem_code(e.elem)}.primitive_bitwidth // 8", None, lit=Lit.INT, prec=PREC_MUL)


def _load(em: ExprEmitter, e: Load) -> Val:
    return access.load(em, e)


def _mma(em: ExprEmitter, e: Mma) -> Val:
    precision = dot_precision(e.form)
    if precision is None or precision not in TRITON_DOT_PRECISION:
        raise em.error(f"mma form `{e.form}` is an instruction commitment the Triton backend cannot keep "
                       "(Triton chooses the instruction)", e, help="write `via dot` (or `via dot.tf32x3`), or lower with --backend cuda")
    a, b = em.emit(e.a), em.emit(e.b)
    if len(a.axes) != 2 or len(b.axes) != 2:
        raise em.error(f"mma operands must be 2-D tiles, got ranks {len(a.axes)} and {len(b.axes)}", e)
    for axis in (a.axes[0], a.axes[1], b.axes[1]):
        if axis.size is not None and axis.size < MIN_DOT_EXTENT:
            raise em.error(f"tl.dot needs every extent >= {MIN_DOT_EXTENT}; this mma has an extent {axis.extent}"
                           f" = {axis.size}", e, help=f"use tiles of at least {MIN_DOT_EXTENT} rows and columns")
    if a.dtype != b.dtype:
        common, _ = promote(a, b, em.symbols.float_vars)
        if common is None:
            raise em.error("mma operands have different element types; cast one of them", e)
        a, b = em.to(a, common), em.to(b, common)
    # Padding lanes of the contracted axis are zeroed in both operands: 0 * (NaN or inf) would leak.
    a = em.without_padding(a, 1, "0")
    b = em.without_padding(b, 0, "0")
    acc = ""
    if e.acc is not None:
        acc = f", acc={em.to(em.emit(e.acc), DType.F32).code}"
    # fp32 operands multiply at full precision unless the form asks for the split (plain TF32 would break the
    # contract); fp16/bf16 ignore the option.
    code = f'tl.dot({a.code}, {b.code}{acc}, input_precision="{TRITON_DOT_PRECISION[precision]}")'
    return Val(code, DType.F32, (a.axes[0], b.axes[1]))


_RULES: dict[type, Callable[[ExprEmitter, Expr], Val]] = {  # type: ignore[dict-item]
    IntLit: _int_lit, FloatLit: _float_lit, BoolLit: _bool_lit, Name: _name, BinOp: _binop, UnaryOp: _unary,
    Index: _index, Transpose: _transpose, SizeOf: _sizeof, Load: _load, Mma: _mma,
    Call: lambda em, call: _call(em, call),
}

def _call(em: ExprEmitter, call: Call) -> Val:
    from cake.lowering.triton.calls import CALL_RULES

    rule = CALL_RULES.get(call.func)
    if rule is None:
        raise em.error(f"the Triton backend has no rule for builtin `{call.func}`", call)
    return rule(em, call)


