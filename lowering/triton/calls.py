"""Builtin calls to `triton.language`: one emit rule per builtin (`exp`, `where`, `sum`, `argmin`, ...).

Semantics the rules keep on every device (see lowering/README.md): math on 16-bit floats runs in fp32 and rounds
back; `sum`/`cumsum` of 16-bit floats accumulate in fp32; reductions never see padding lanes; `argmin`/`argmax`
give the first index of the extreme and never pick a NaN, on every device (`_first_extreme`); `min` and `argmin`
of one tile (`max`/`argmax`) share their reductions (extremes.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cake.ir.builtins import register_emitters
from cake.ir.nodes import Call, DType, Name
from cake.lowering.triton.extremes import Fused, Key
from cake.lowering.triton.values import (
    INT_LIMITS,
    PREC_ADD,
    PREC_AND,
    PREC_CMP,
    PREC_MUL,
    Elem,
    Lit,
    Val,
    broadcast,
    expand,
    promote,
)

if TYPE_CHECKING:
    from cake.lowering.triton.exprs import ExprEmitter


def _math(name: str) -> Callable[[ExprEmitter, Call], Val]:
    def rule(em: ExprEmitter, call: Call) -> Val:
        (x,) = em.args(call, 1)
        is_float = x.dtype in (DType.F16, DType.BF16, DType.F32) or isinstance(x.dtype, str)
        if is_float and not em.maybe_16bit(x.dtype):
            return Val(f"tl.{name}({x.code})", x.dtype, x.axes)
        # Triton's math wants fp32: compute there; a 16-bit float operand gets its own type back.
        up = f"tl.{name}({em.to(x, DType.F32).code})"
        if not is_float:
            return Val(up, DType.F32, x.axes)
        assert x.dtype is not None
        return Val(f"{up}.to({em.elem_code(x.dtype)})", x.dtype, x.axes)

    return rule


def _abs(em: ExprEmitter, call: Call) -> Val:
    (x,) = em.args(call, 1)
    return Val(f"tl.abs({x.code})", x.dtype, x.axes, x.lit)


def _extreme(name: str) -> Callable[[ExprEmitter, Call], Val]:
    def rule(em: ExprEmitter, call: Call) -> Val:
        a, b = em.args(call, 2)
        dtype, lit = promote(a, b, em.symbols.float_vars)
        return Val(f"tl.{name}({a.code}, {b.code})", dtype, broadcast(a.axes, b.axes), lit)

    return rule


def _where(em: ExprEmitter, call: Call) -> Val:
    c, a, b = em.args(call, 3)
    dtype, lit = promote(a, b, em.symbols.float_vars)
    if lit is not None:  # both branches literal: the result takes the literal's natural type
        dtype, lit = (DType.F32 if lit is Lit.FLOAT else DType.BOOL if lit is Lit.BOOL else DType.I32), None
    return Val(f"tl.where({c.code}, {a.code}, {b.code})", dtype, broadcast(c.axes, a.axes, b.axes))


def _cast(em: ExprEmitter, call: Call) -> Val:
    if len(call.args) != 2 or not isinstance(call.args[1], Name):
        raise em.error("`cast` takes a value and an element type: `cast(e, f32)`", call)
    x = em.emit(call.args[0])
    target = call.args[1].id
    try:
        elem: Elem = DType(target)
    except ValueError:
        if target not in em.symbols.typevars:
            raise em.error(f"`{target}` is not an element type", call.args[1]) from None
        elem = target
    return em.to(x, elem)


def _reduction(kind: str) -> Callable[[ExprEmitter, Call], Val]:
    def rule(em: ExprEmitter, call: Call) -> Val:
        key = em.extremes.key(call) if kind in EXTREMES else None
        if key is not None:
            fused = em.extremes.done.get(key) or _fused_extreme(em, call, key)
            return fused.index if kind.startswith("arg") else fused.value
        (x,) = em.args(call, 1)
        if not x.axes:
            raise em.error(f"`{kind}` reduces a tile, got a scalar", call)
        axis = em.axis_kw(call, len(x.axes))
        if axis is None and (kind.startswith("arg") and len(x.axes) > 1):
            raise em.error(f"`{kind}` of a rank-{len(x.axes)} tile needs `axis=`", call)
        if kind == "sum" and x.lit is None and em.maybe_16bit(x.dtype):
            x = em.to(x, DType.F32)  # 16-bit sums accumulate in fp32
        identity = _identity(kind, x.dtype)
        if kind.startswith("arg"):
            return _first_extreme(em, x, 0 if axis is None else axis, kind.removeprefix("arg")).index
        for i in range(len(x.axes)) if axis is None else (axis,):
            x = em.without_padding(x, i, identity)
        axis_arg = "" if axis is None else f", axis={axis}"
        code = f"tl.{kind}({x.code}{axis_arg})"
        axes = () if axis is None else x.axes[:axis] + x.axes[axis + 1:]
        return Val(code, x.dtype, axes)

    return rule


EXTREMES = frozenset({"min", "max", "argmin", "argmax"})


# The index reduction's "no lane holds the extreme" value: the int32 maximum. Against it `tl.min` of
# `where(hit, lane, NO_LANE)` compiles to one predicated integer min per element; a smaller sentinel (the
# extent) costs a select more (sm_90a SASS, lowering/README.md).
NO_LANE = INT_LIMITS[DType.I32][1]


def _first_extreme(em: ExprEmitter, x: Val, axis: int, family: str) -> Fused:
    """The extreme of `x` along `axis` and the first index holding it, NaN never the extreme: two reductions,
    both order-independent, so the result is the same on every device and in the interpreter.

    * value: `tl.min`/`tl.max`, whose combine is IEEE minNum/maxNum — a NaN loses to any number;
    * index: the smallest lane whose value equals it (`tl.min` over `where(x == value, lane, NO_LANE)`).

    Per element that is one float min/max, one compare and one integer min. The alternatives cost more:
    Triton's `return_indices=True` with the first-index tie-break compares values *and* indices in every
    step of the reduction, and a NaN guard (`tl.minimum(x, inf)`) before it adds one more instruction per
    element (together 1.6x the hand-written kernel's loop, lowering/README.md). A row with no number at all
    (every lane NaN, or only padding) has no hit: index 0 and the identity (+inf for min), as before."""
    identity = _identity(family, x.dtype)  # the callers refused a scalar `x`
    x = em.named(em.without_padding(x, axis, identity), "v")
    rank, lane_axis = len(x.axes), x.axes[axis]
    value = em.fn.assign_temp(family, f"tl.{family}({x.code}, axis={axis})")
    lanes = expand(f"tl.arange(0, {lane_axis.physical})", axis, 1, rank)
    hit = f"{x.code} == {f'tl.expand_dims({value}, {axis})' if rank > 1 else value}"
    index = em.fn.assign_temp(f"arg{family}", f"tl.min(tl.where({hit}, {lanes}, {NO_LANE}), axis={axis})")
    # No hit (or, with padding, only a padding lane's identity): index 0, as NaN-free argmin of nothing.
    em.fn.line(f"{index} = tl.where({index} < {lane_axis.extent}, {index}, 0)")
    axes = x.axes[:axis] + x.axes[axis + 1:]
    if isinstance(x.dtype, DType) and not x.dtype.is_float:
        return Fused(Val(value, x.dtype, axes), Val(index, DType.I32, axes))
    # A row of NaN reduces to NaN under minNum; the fused value is the identity there (the CUDA backend's).
    extreme = "minimum" if family == "min" else "maximum"
    return Fused(Val(f"tl.{extreme}({value}, {identity})", x.dtype, axes), Val(index, DType.I32, axes))


def _fused_extreme(em: ExprEmitter, call: Call, key: Key) -> Fused:
    """`min`/`argmin` (or `max`/`argmax`) of one tile (extremes.py): `_first_extreme` once, both results
    recorded for the second call of the pair."""
    family = key[0]
    (x,) = em.args(call, 1)
    if not x.axes:
        raise em.error(f"`{call.func}` reduces a tile, got a scalar", call)
    axis = em.axis_kw(call, len(x.axes))
    if axis is None and len(x.axes) > 1:
        raise em.error(f"`{call.func}` of a rank-{len(x.axes)} tile needs `axis=`", call)
    fused = _first_extreme(em, x, 0 if axis is None else axis, family)
    em.extremes.done[key] = fused
    return fused


def _identity(kind: str, dtype: Elem | None) -> str:
    if kind == "sum":
        return "0"
    low = kind in ("max", "argmax")
    if isinstance(dtype, DType) and dtype in INT_LIMITS:
        return str(INT_LIMITS[dtype][0 if low else 1])
    return 'float("-inf")' if low else 'float("inf")'


def _cumsum(em: ExprEmitter, call: Call) -> Val:
    (x,) = em.args(call, 1)
    axis = em.axis_kw(call, len(x.axes))
    if axis is None:
        axis = len(x.axes) - 1
    if em.maybe_16bit(x.dtype):
        x = em.to(x, DType.F32)
    # Padding lanes sit after the real ones along the axis, so an inclusive scan never reads them.
    return Val(f"tl.cumsum({x.code}, axis={axis})", x.dtype, x.axes)


# Sorted keys compare as i32 up to this many lanes: (position << log2 n) | rank must stay below 2^31.
RANK_EQUAL_MAX_LANES = 1 << 15


def _rank_equal(em: ExprEmitter, call: Call) -> Val:
    """Stable rank among equal keys without the [n, n] comparison: sort (key, position) packed into one i64
    (the position in the low log2(n) bits keeps the sort stable), count each run of equal keys with a segmented
    scan (`_k_run_length`), then sort (position, rank) to bring the ranks back to the keys' order (`_k_sort`,
    `_k_run_length`: tl.sort and tl.associative_scan on a GPU; module.py says why not under the interpreter).
    Padding lanes sit after the real ones, and a rank counts only earlier lanes, so they never change a real
    lane's rank."""
    (x,) = em.args(call, 1)
    if len(x.axes) != 1:
        raise em.error(f"`rank_equal` ranks one vector, got a rank-{len(x.axes)} tile", call)
    axis = x.axes[0]
    if axis.size is not None and axis.size > RANK_EQUAL_MAX_LANES:
        raise em.error(f"`rank_equal` of {axis.size} lanes: at most {RANK_EQUAL_MAX_LANES} (the position and "
                       "the rank are packed into one i32 sort key)", call)
    n = axis.physical
    fn = em.fn
    fn.line(f"tl.static_assert({n} <= {RANK_EQUAL_MAX_LANES})")
    keys = em.to(x, DType.I64)
    packed = fn.assign_temp("rk", f"_k_sort({keys.atom()} * {n} + tl.arange(0, {n}).to(tl.int64), {n})")
    position = fn.assign_temp("rkpos", f"{packed} & ({n} - 1)")
    run = fn.assign_temp("rkrun", f"_k_run_length({packed} - {position}, {n})")
    back = fn.assign_temp("rkback", f"_k_sort({position}.to(tl.int32) * {n} + {run} - 1, {n})")
    return Val(f"{back} & ({n} - 1)", DType.I32, x.axes, prec=PREC_AND)


def _arange(em: ExprEmitter, call: Call) -> Val:
    if len(call.args) != 1:
        raise em.error("`arange(n)` takes one argument", call)
    axis = em.axis_of(call.args[0])
    return Val(f"tl.arange(0, {axis.physical})", DType.I32, (axis,))


def _tril(em: ExprEmitter, call: Call) -> Val:
    if len(call.args) != 1:
        raise em.error("`tril(n)` takes one argument", call)
    axis = em.axis_of(call.args[0])
    rows, cols = f"tl.arange(0, {axis.physical})[:, None]", f"tl.arange(0, {axis.physical})[None, :]"
    diagonal = next((kw.value for kw in call.kwargs if kw.name == "diagonal"), None)
    if diagonal is not None:
        d = em.emit(diagonal)
        if d.is_tile:
            raise em.error("the `diagonal=` of `tril` is a scalar", diagonal)
        rows = f"{rows} + {d.operand(PREC_ADD, right=True)}"
    # Padding lanes (rows or columns past n) may hold true: every consumer masks them (stores, reductions).
    return Val(f"{cols} <= {rows}", DType.BOOL, (axis, axis), prec=PREC_CMP)


def _cdiv(em: ExprEmitter, call: Call) -> Val:
    a, b = em.args(call, 2)
    if a.lit is not None and b.lit is not None:
        return Val(f"({a.operand(PREC_ADD)} + {b.operand(PREC_ADD)} - 1) // {b.operand(PREC_MUL, right=True)}",
                   None, lit=Lit.INT, prec=PREC_MUL)
    return Val(f"tl.cdiv({a.code}, {b.code})", DType.I32, broadcast(a.axes, b.axes))


CALL_RULES: dict[str, Callable[[ExprEmitter, Call], Val]] = {
    "exp": _math("exp"), "exp2": _math("exp2"), "log": _math("log"), "sqrt": _math("sqrt"),
    "rsqrt": _math("rsqrt"), "abs": _abs,
    "maximum": _extreme("maximum"), "minimum": _extreme("minimum"), "where": _where, "cast": _cast,
    "sum": _reduction("sum"), "max": _reduction("max"), "min": _reduction("min"),
    "argmin": _reduction("argmin"), "argmax": _reduction("argmax"), "cumsum": _cumsum,
    "arange": _arange, "tril": _tril, "cdiv": _cdiv, "rank_equal": _rank_equal,
}
register_emitters("triton", CALL_RULES)
