"""Short source-like text of an expression, for diagnostic messages (spans point at the real text)."""

from __future__ import annotations

import math

from cake.ir import nodes as n


def expr_text(e: n.Expr | n.Slice | n.NewAxis | None, level: int = 0) -> str:
    if e is None:
        return ""
    if isinstance(e, n.NewAxis):
        return "None"
    if isinstance(e, n.Slice):
        start = expr_text(e.start)
        return f"{start} : +{expr_text(e.size)}" if e.size is not None else (f"{start} :" if start else ":")
    if isinstance(e, n.IntLit):
        return str(e.value)
    if isinstance(e, n.FloatLit):
        return "inf" if math.isinf(e.value) else repr(e.value)
    if isinstance(e, n.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, n.Name):
        return e.id
    if isinstance(e, n.SizeOf):
        return f"sizeof({e.elem.value if isinstance(e.elem, n.DType) else e.elem.name})"
    if isinstance(e, n.BinOp):
        mine = e.op.precedence
        text = f"{expr_text(e.lhs, mine)} {e.op.value} {expr_text(e.rhs, mine + 1)}"
        return f"({text})" if mine < level else text
    if isinstance(e, n.UnaryOp):
        return f"{e.op.value}{expr_text(e.operand, n.UNARY_PRECEDENCE)}"
    if isinstance(e, n.Call):
        parts = [expr_text(a) for a in e.args] + [f"{k.name}={expr_text(k.value)}" for k in e.kwargs]
        return f"{e.func}({', '.join(parts)})"
    if isinstance(e, n.Index):
        return f"{expr_text(e.base, n.POSTFIX_PRECEDENCE)}[{', '.join(expr_text(i) for i in e.items)}]"
    if isinstance(e, n.Transpose):
        return f"{expr_text(e.operand, n.POSTFIX_PRECEDENCE)}.T"
    if isinstance(e, n.Load):
        return f"load {expr_text(e.source)}" + (" masked" if e.masked else "")
    if isinstance(e, n.Mma):
        args = ", ".join(expr_text(a) for a in (e.a, e.b, e.acc) if a is not None)
        return f"mma({args}) via {e.form}"
    return type(e).__name__
