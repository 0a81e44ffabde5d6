"""Evaluate param / dim / shape expressions to numbers: `cdiv(N, BN)`, `BK*D*sizeof(T) + BK*4`, ...

    env = {**default_bindings(kernel), "N": 65536, "T": DType.BF16}
    evaluate(barrier.tx, env)            # -> 32768

Names are looked up in `env` (params, dims, grid/loop variables: ints or floats; dtype variables: a DType,
used by `sizeof`). Integer arithmetic stays integral (`//`, `%` and `cdiv` floor/ceil like Python); `/` is
true division. Comparisons and `& | !` give 0 or 1. Anything else — an unbound name, a tile expression
(`load`, `mma`, an index), a non-scalar builtin, division by zero — raises `EvaluationError` naming the
expression and its span.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import TypeAlias

from cake.ir import nodes as n

from cake.diagnostics import Span

Number: TypeAlias = int | float
Binding: TypeAlias = int | float | n.DType


class EvaluationError(Exception):
    """An expression that cannot be evaluated to a number; `span` locates the offending part."""

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span


def _floordiv(a: Number, b: Number) -> Number:
    return a // b


_ARITH: Mapping[n.BinOpKind, Callable[[Number, Number], Number]] = {
    n.BinOpKind.ADD: operator.add,
    n.BinOpKind.SUB: operator.sub,
    n.BinOpKind.MUL: operator.mul,
    n.BinOpKind.DIV: operator.truediv,
    n.BinOpKind.FLOORDIV: _floordiv,
    n.BinOpKind.MOD: operator.mod,
    n.BinOpKind.LT: lambda a, b: int(a < b),
    n.BinOpKind.LE: lambda a, b: int(a <= b),
    n.BinOpKind.GT: lambda a, b: int(a > b),
    n.BinOpKind.GE: lambda a, b: int(a >= b),
    n.BinOpKind.EQ: lambda a, b: int(a == b),
    n.BinOpKind.NE: lambda a, b: int(a != b),
    n.BinOpKind.AND: lambda a, b: int(bool(a) and bool(b)),
    n.BinOpKind.OR: lambda a, b: int(bool(a) or bool(b)),
}
_DIVISIONS = frozenset({n.BinOpKind.DIV, n.BinOpKind.FLOORDIV, n.BinOpKind.MOD})


def evaluate(expr: n.Expr, env: Mapping[str, Binding]) -> Number:
    """The value of a scalar expression under `env`; raises `EvaluationError` when it has none."""
    if isinstance(expr, (n.IntLit, n.FloatLit)):
        return expr.value
    if isinstance(expr, n.BoolLit):
        return int(expr.value)
    if isinstance(expr, n.Name):
        if expr.id not in env:
            raise EvaluationError(f"unbound name `{expr.id}`", expr.span)
        value = env[expr.id]
        if isinstance(value, n.DType):
            raise EvaluationError(f"`{expr.id}` is a dtype, not a number (use sizeof({expr.id}))", expr.span)
        return value
    if isinstance(expr, n.SizeOf):
        return _dtype(expr.elem, env, expr.span).bytes
    if isinstance(expr, n.UnaryOp):
        value = evaluate(expr.operand, env)
        return -value if expr.op is n.UnaryOpKind.NEG else int(not value)
    if isinstance(expr, n.BinOp):
        lhs, rhs = evaluate(expr.lhs, env), evaluate(expr.rhs, env)
        if expr.op in _DIVISIONS and rhs == 0:
            raise EvaluationError("division by zero", expr.span)
        return _ARITH[expr.op](lhs, rhs)
    if isinstance(expr, n.Call):
        return _call(expr, env)
    raise EvaluationError(f"not a scalar expression: {type(expr).__name__.lower()}", expr.span)


def _dtype(elem: n.ElemType, env: Mapping[str, Binding], span: Span | None) -> n.DType:
    if isinstance(elem, n.DType):
        return elem
    bound = env.get(elem.name)
    if not isinstance(bound, n.DType):
        raise EvaluationError(f"dtype variable `{elem.name}` is not bound to a dtype", span)
    return bound


def _call(call: n.Call, env: Mapping[str, Binding]) -> Number:
    if call.kwargs:
        raise EvaluationError(f"`{call.func}` is not a scalar function", call.span)
    args = [evaluate(a, env) for a in call.args]
    if call.func == "cdiv" and len(args) == 2:
        a, b = args
        if b == 0:
            raise EvaluationError("division by zero in cdiv", call.span)
        return -(-a // b)
    if call.func in ("maximum", "minimum") and len(args) == 2:
        return max(args) if call.func == "maximum" else min(args)
    if call.func == "abs" and len(args) == 1:
        return abs(args[0])
    raise EvaluationError(f"`{call.func}` with {len(args)} arguments is not a scalar function", call.span)


def default_bindings(kernel: n.Kernel) -> dict[str, Binding]:
    """Every param bound to its default value."""
    return {p.name: p.default for p in kernel.params}
