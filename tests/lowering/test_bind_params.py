"""bind_params: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

import pytest
from cake.ir.parser import parse
from cake.lowering import codes
from cake.lowering.passes.bind_params import bind_params
from cake.lowering.pipeline import LowerContext

from cake.diagnostics import DiagnosticError

BEFORE = """
schedule s implements row_sum
target sm_90a
dtype T in {f32}
param BM = 16 in {16, 32}
param STAGES = 2 in 1 .. 4
dims M, N
tensor x: in T[M, N]
tensor y: out T[M]
grid i in cdiv(M, BM)
role main: warps 4 {
  let acc: f32[BM] = 0
  store cast(acc, T) -> y[i*BM : +BM] masked
}
"""


def ctx(**params: int) -> LowerContext:
    return LowerContext("triton", "sm_90a", params, "s.cake")


def test_assigned_params_become_the_defaults_others_keep_theirs() -> None:
    expected = parse(BEFORE.replace("param BM = 16", "param BM = 32"))
    assert bind_params(parse(BEFORE), ctx(BM=32)) == expected


def test_no_assignment_is_the_identity() -> None:
    assert bind_params(parse(BEFORE), ctx()) == parse(BEFORE)


@pytest.mark.parametrize(("params", "fragment"), [
    ({"BM": 24}, "param `BM` = 24 is outside its domain"),
    ({"STAGES": 4}, "param `STAGES` = 4 is outside its domain"),  # ranges are half-open
    ({"BK": 64}, "`BK` is not a param of schedule `s`"),
])
def test_bad_assignments_are_refused(params: dict[str, int], fragment: str) -> None:
    with pytest.raises(DiagnosticError) as raised:
        bind_params(parse(BEFORE), ctx(**params))
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == codes.BAD_PARAM
    assert fragment in diagnostic.message
    assert diagnostic.file == "s.cake"


def test_out_of_domain_points_at_the_param_declaration() -> None:
    with pytest.raises(DiagnosticError) as raised:
        bind_params(parse(BEFORE, "s.cake"), ctx(BM=24))
    span = raised.value.diagnostics[0].span
    assert span is not None and (span.line, span.column) == (5, 1)
    assert raised.value.diagnostics[0].label == "24 not in {16, 32}"
