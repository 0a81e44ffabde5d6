"""Per-op emit rules: how each elementwise operator, builtin and reduction becomes C++.

Every rule maps operand element expressions (strings) to a result expression, and operand dtypes to the
result dtype. Low-precision floats (f16, bf16) are widened to f32 before arithmetic, as tensor-core
epilogues do; the result stays f32 unless a `cast` narrows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cake.ir import types
from cake.ir.nodes import BinOpKind, DType, UnaryOpKind
from cake.lowering.cuda.cnames import CTYPE, float_literal, is_low_float
from cake.lowering.cuda.errors import Code, Unlowerable


def promote(a: DType, b: DType) -> DType:
    """Result dtype of arithmetic on a and b: the IR's promotion (`cake.ir.types.promote`), computed in f32
    when it is a float (low-precision floats are widened before arithmetic, as tensor-core epilogues do)."""
    common = types.promote(a, b)
    return common if isinstance(common, DType) and not common.is_float else DType.F32


def widen(expr: str, dtype: DType) -> str:
    """An operand as the type arithmetic runs in."""
    return f"cake_to_f32({expr})" if is_low_float(dtype) else expr


def convert(expr: str, src: DType, dst: DType) -> str:
    """`cast(e, dst)` of an element of dtype src."""
    if src is dst:
        return expr
    if dst is DType.F32:
        return f"cake_to_f32({expr})" if src is not DType.BOOL else f"({expr} ? 1.0f : 0.0f)"
    if dst is DType.BF16:
        return f"__float2bfloat16({widen(expr, src)})" if src is not DType.F32 else f"__float2bfloat16({expr})"
    if dst is DType.F16:
        return f"__float2half({widen(expr, src)})" if src is not DType.F32 else f"__float2half({expr})"
    return f"static_cast<{CTYPE[dst]}>({widen(expr, src)})"


@dataclass(frozen=True, slots=True)
class BinRule:
    render: Callable[[str, str, DType, DType], str]
    result: Callable[[DType, DType], DType]


def _arith(op: str) -> BinRule:
    return BinRule(lambda a, b, ta, tb: f"({widen(a, ta)} {op} {widen(b, tb)})", promote)


def _compare(op: str) -> BinRule:
    return BinRule(lambda a, b, ta, tb: f"({widen(a, ta)} {op} {widen(b, tb)})", lambda a, b: DType.BOOL)


def _int_only(op: str, name: str) -> BinRule:
    def render(a: str, b: str, ta: DType, tb: DType) -> str:
        if ta.is_float or tb.is_float:
            raise Unlowerable(Code.UNSUPPORTED, f"`{name}` on floating-point tiles")
        return f"({a} {op} {b})"
    return BinRule(render, promote)


def _floordiv(a: str, b: str, ta: DType, tb: DType) -> str:
    if ta.is_float or tb.is_float:
        return f"floorf({widen(a, ta)} / {widen(b, tb)})"
    return f"({a} / {b})"  # indices are non-negative: C division is floor division there


def _truediv(a: str, b: str, ta: DType, tb: DType) -> str:
    left = widen(a, ta) if ta.is_float else f"static_cast<float>({a})"
    right = widen(b, tb) if tb.is_float else f"static_cast<float>({b})"
    return f"({left} / {right})"


def _logic(op: str) -> BinRule:
    return BinRule(lambda a, b, ta, tb: f"({a} {op} {b})",
                   lambda a, b: DType.BOOL if a is DType.BOOL and b is DType.BOOL else promote(a, b))


BINARY: dict[BinOpKind, BinRule] = {
    BinOpKind.ADD: _arith("+"), BinOpKind.SUB: _arith("-"), BinOpKind.MUL: _arith("*"),
    BinOpKind.DIV: BinRule(_truediv, lambda a, b: DType.F32),
    BinOpKind.FLOORDIV: BinRule(_floordiv, promote), BinOpKind.MOD: _int_only("%", "%"),
    BinOpKind.LT: _compare("<"), BinOpKind.LE: _compare("<="), BinOpKind.GT: _compare(">"),
    BinOpKind.GE: _compare(">="), BinOpKind.EQ: _compare("=="), BinOpKind.NE: _compare("!="),
    BinOpKind.AND: _logic("&"), BinOpKind.OR: _logic("|"),
}


def unary(op: UnaryOpKind, a: str, ta: DType) -> tuple[str, DType]:
    if op is UnaryOpKind.NEG:
        out = promote(ta, ta) if ta.is_float else ta
        return f"(-{widen(a, ta)})", out
    return f"(!{a})", DType.BOOL


# Elementwise builtins: name -> (render over operand exprs/dtypes, result dtype).
_F32_MATH = {"exp": "expf", "exp2": "exp2f", "log": "logf", "sqrt": "sqrtf", "rsqrt": "rsqrtf"}


def call(func: str, args: list[str], dtypes: list[DType]) -> tuple[str, DType]:
    if func in _F32_MATH:
        return f"{_F32_MATH[func]}({_as_f32(args[0], dtypes[0])})", DType.F32
    if func == "abs":
        return (f"fabsf({widen(args[0], dtypes[0])})", promote(dtypes[0], dtypes[0])) if dtypes[0].is_float \
            else (f"abs({args[0]})", dtypes[0])
    if func in ("minimum", "maximum"):
        out = promote(dtypes[0], dtypes[1])
        a, b = widen(args[0], dtypes[0]), widen(args[1], dtypes[1])
        if out.is_float:
            # fminf/fmaxf return the other operand when one is NaN: a NaN never wins a minimum.
            return f"{'fminf' if func == 'minimum' else 'fmaxf'}({a}, {b})", out
        return f"{'min' if func == 'minimum' else 'max'}({a}, {b})", out
    if func == "where":
        out = promote(dtypes[1], dtypes[2])
        return f"({args[0]} ? {widen(args[1], dtypes[1])} : {widen(args[2], dtypes[2])})", out
    raise Unlowerable(Code.UNSUPPORTED, f"the builtin `{func}` has no CUDA lowering yet")


def _as_f32(a: str, t: DType) -> str:
    return widen(a, t) if t.is_float else f"static_cast<float>({a})"


# Reductions: name -> (identity literal for the result dtype, combine(acc, v) statement, keeps an index).
@dataclass(frozen=True, slots=True)
class ReduceRule:
    name: str
    index: bool  # argmin/argmax: the result is the position
    better: str  # C comparison `v {better} best` that replaces the running value ("" for sum)

    def identity(self, dtype: DType) -> str:
        if self.name == "sum":
            return float_literal(0.0) if dtype.is_float else "0"
        if self.better == "<":
            return float_literal(float("inf")) if dtype.is_float else "2147483647"
        return float_literal(float("-inf")) if dtype.is_float else "(-2147483647 - 1)"


REDUCTIONS: dict[str, ReduceRule] = {
    "sum": ReduceRule("sum", False, ""),
    "min": ReduceRule("min", False, "<"),
    "max": ReduceRule("max", False, ">"),
    "argmin": ReduceRule("argmin", True, "<"),
    "argmax": ReduceRule("argmax", True, ">"),
}
ELEMENTWISE = frozenset({*_F32_MATH, "abs", "minimum", "maximum", "where"})
