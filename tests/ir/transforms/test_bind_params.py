"""bind_params: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

import pytest
from cake.ir.parser import parse
from cake.ir.transforms.bind_params import BAD_PARAM, bind_params
from cake.lowering import codes
from cake.lowering.passes import bind_params as pipeline_step
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


def test_assigned_params_become_the_defaults_others_keep_theirs() -> None:
    expected = parse(BEFORE.replace("param BM = 16", "param BM = 32"))
    assert bind_params(parse(BEFORE), {"BM": 32}) == expected


def test_no_assignment_is_the_identity() -> None:
    kernel = parse(BEFORE)
    assert bind_params(kernel, {}) is kernel and bind_params(kernel, {"BM": 16}) is kernel


def test_the_lowering_pipeline_step_binds_the_context_assignment() -> None:
    expected = parse(BEFORE.replace("param STAGES = 2", "param STAGES = 3"))
    assert pipeline_step.bind_params(parse(BEFORE), LowerContext("triton", "sm_90a", {"STAGES": 3})) == expected
    assert codes.BAD_PARAM == BAD_PARAM  # one code for a bad assignment, wherever it is bound


@pytest.mark.parametrize(("params", "fragment"), [
    ({"BM": 24}, "param `BM` = 24 is outside its domain"),
    ({"STAGES": 4}, "param `STAGES` = 4 is outside its domain"),  # ranges are half-open
    ({"BK": 64}, "`BK` is not a param of schedule `s`"),
])
def test_bad_assignments_are_refused(params: dict[str, int], fragment: str) -> None:
    with pytest.raises(DiagnosticError) as raised:
        bind_params(parse(BEFORE), params, file="s.cake")
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == BAD_PARAM
    assert fragment in diagnostic.message
    assert diagnostic.file == "s.cake"


def test_out_of_domain_points_at_the_param_declaration() -> None:
    with pytest.raises(DiagnosticError) as raised:
        bind_params(parse(BEFORE, "s.cake"), {"BM": 24}, file="s.cake")
    span = raised.value.diagnostics[0].span
    assert span is not None and (span.line, span.column) == (5, 1)
    assert raised.value.diagnostics[0].label == "24 not in {16, 32}"
