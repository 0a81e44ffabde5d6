"""`parse(print_kernel(k)) == k` over every fixture and over Hypothesis-generated kernels; printing is
idempotent."""

from __future__ import annotations

import pytest
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.printer import expr, format_source, print_kernel
from hypothesis import HealthCheck, given, settings
from ir_fixtures import fixture_texts
from strategies import exprs, kernels

TEXTS = fixture_texts()


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_fixture_round_trip(name: str) -> None:
    kernel = parse(TEXTS[name], name)
    text = print_kernel(kernel)
    assert parse(text) == kernel
    assert print_kernel(parse(text)) == text
    formatted = format_source(TEXTS[name])
    assert parse(formatted) == kernel and format_source(formatted) == formatted


# Kernels are large draws (~0.15 s each to generate); 40 examples keep this test near five seconds.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels)
def test_generated_kernel_round_trip(kernel: n.Kernel) -> None:
    text = print_kernel(kernel)
    assert parse(text) == kernel
    assert print_kernel(parse(text)) == text


def _wrap(e: n.Expr) -> str:
    return f"schedule s implements o\ntarget sm_90a\ngrid i in 1\nrole r: warps 1 {{\n  let v = {expr(e)}\n}}\n"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs)
def test_generated_expression_round_trip(e: n.Expr) -> None:
    let = parse(_wrap(e)).launches[0].roles[0].body[0]
    assert isinstance(let, n.Let) and let.value == e
