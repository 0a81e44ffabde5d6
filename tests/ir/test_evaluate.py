"""Scalar evaluation of param/dim/shape expressions, and the builtin table."""

from __future__ import annotations

import pytest
from cake.ir import nodes as n
from cake.ir.builtins import BUILTINS, BuiltinKind, builtin, of_kind
from cake.ir.evaluate import EvaluationError, default_bindings, evaluate
from cake.ir.parser import parse
from ir_fixtures import ROOT


def _expr(text: str) -> n.Expr:
    kernel = parse(f"schedule s implements o\ntarget sm_90a\ngrid i in {text}\nrole r: warps 1 {{ }}\n")
    return kernel.launches[0].grid.axes[0].extent


@pytest.mark.parametrize(("text", "value"), [
    ("cdiv(N, BN)", 8), ("cdiv(1000, 128)", 8), ("BK*D*sizeof(T) + BK*4", 64 * 128 * 2 + 256),
    ("7 // 2", 3), ("-7 // 2", -4), ("7 % 3", 1), ("7 / 2", 3.5), ("2 * (3 + 4)", 14),
    ("N <= 1000 & BN == 128", 1), ("!(BN > 64) | false", 0), ("maximum(BN, 256)", 256),
    ("sizeof(f32) * sizeof(i64)", 32), ("1.5e3", 1500.0),
])
def test_evaluate(text: str, value: float) -> None:
    env = {"N": 1000, "BN": 128, "BK": 64, "D": 128, "T": n.DType.BF16}
    assert evaluate(_expr(text), env) == value


@pytest.mark.parametrize(("text", "message"), [
    ("cdiv(M, 4)", "unbound name `M`"),
    ("T + 1", "`T` is a dtype, not a number (use sizeof(T))"),
    ("sizeof(U)", "dtype variable `U` is not bound to a dtype"),
    ("N // 0", "division by zero"),
    ("sum(N, axis=0)", "`sum` is not a scalar function"),
    ("x[0]", "not a scalar expression: index"),
])
def test_evaluate_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(EvaluationError) as caught:
        evaluate(_expr(text), {"N": 10, "T": n.DType.F16})
    assert caught.value.message == message and caught.value.span is not None


def test_default_bindings_and_barrier_bytes() -> None:
    kernel = parse((ROOT / "experiments/kmeans/assign_pingpong.cake").read_text())
    env = {**default_bindings(kernel), "D": 128, "T": n.DType.BF16}
    assert default_bindings(kernel) == {"BN": 128, "BK": 128, "STAGES": 4}
    launch = kernel.launch("assign")
    assert launch is not None
    tx = {b.name: evaluate(b.tx, env) for b in launch.barriers if b.tx is not None}
    assert tx == {"x_full": 128 * 128 * 2, "c_full": 128 * 128 * 2 + 128 * 4}


def test_builtin_table() -> None:
    assert of_kind(BuiltinKind.REDUCTION) == {"sum", "max", "min", "argmin", "argmax"}
    assert of_kind(BuiltinKind.SCAN) == {"cumsum", "rank_equal"} and of_kind(BuiltinKind.SCALAR) == {"cdiv"}
    assert builtin("mma") is None and builtin("sizeof") is None  # syntax, not calls
    assert all(b.required_keywords <= b.keywords for b in BUILTINS.values())


@pytest.mark.parametrize(("call", "problem"), [
    ("sum(x, axis=1)", None),
    ("sum(x)", "`sum` needs `axis=`"),
    ("sum(x, dim=1)", "`sum` has no keyword `dim=` (it takes `axis=`)"),
    ("where(c, a)", "`where` takes 3 positional arguments, got 2"),
    ("exp(x, axis=0)", "`exp` has no keyword `axis=` (it takes no keywords)"),
])
def test_builtin_accepts(call: str, problem: str | None) -> None:
    e = _expr(call)
    assert isinstance(e, n.Call)
    spec = builtin(e.func)
    assert spec is not None and spec.accepts(e) == problem
