"""`for ... expect E`: the trip count the cost model prices for a loop whose bound depends on loaded data
(update_sorted's walk over one cluster's segment). Parsed, printed back, typed as a scalar, ignored by the
backends, and required by the cost model only where the bound cannot be evaluated."""

from __future__ import annotations

import pytest
from cake.ir.check import check_text, errors
from cake.ir.cost import CostError, predict
from cake.ir.nodes import DType, For
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.visit import walk_stmts

SEGMENTS = """\
schedule segments implements kmeans_update
target sm_90a
param BC = 32 in {16, 32}
dims B, N, K, static D
tensor x: in f32[B, N, D]
tensor ids: in i64[B, N]
tensor c_old: in f32[B, K, D]
tensor c_new: out f32[B, K, D]
scratch counts: i32[B, K] = 0
grid k in K, b in B
role main: warps 2 {
  let cnt: i32 = load counts[b, k]
  let acc: f32[D] = 0.0
  for c in 0 .. cdiv(cnt, BC) expect cdiv(N, K * BC) {
    acc = acc + sum(load x[b, c * BC : +BC, :] masked other 0, axis=0)
  }
  store acc -> c_new[b, k, :]
}
"""
CELL = {"B": 32, "N": 75600, "K": 1000, "D": 128}


def _loop(text: str) -> For:
    return next(s for role in parse(text).launches[0].roles for s in walk_stmts(role.body) if isinstance(s, For))


def test_expect_parses_prints_back_and_types() -> None:
    kernel = parse(SEGMENTS)
    assert _loop(SEGMENTS).expect is not None
    assert "for c in 0 .. cdiv(cnt, BC) expect cdiv(N, K * BC) {" in print_kernel(kernel)
    assert parse(print_kernel(kernel)) == kernel
    assert errors(check_text(SEGMENTS, "segments.cake")) == ()


def test_a_tile_valued_expect_is_a_located_type_error() -> None:
    bad = SEGMENTS.replace("expect cdiv(N, K * BC)", "expect arange(BC)")
    found = errors(check_text(bad, "bad.cake"))
    assert [d.code for d in found] == ["E0201"] and found[0].span is not None and found[0].span.line == 14


def test_the_cost_model_prices_the_stated_trip_count() -> None:
    priced = predict(parse(SEGMENTS), dims=CELL, dtype=DType.F32)
    doubled = predict(parse(SEGMENTS.replace("expect cdiv(N, K * BC)", "expect 2 * cdiv(N, K * BC)")), dims=CELL,
                      dtype=DType.F32)
    assert 0 < priced.time_s < doubled.time_s


def test_a_data_dependent_bound_without_expect_says_what_to_write() -> None:
    with pytest.raises(CostError, match=r"cnt \(the trip count of `for c`\).*needs `expect N`"):
        predict(parse(SEGMENTS.replace(" expect cdiv(N, K * BC)", "")), dims=CELL, dtype=DType.F32)
