"""drop_unused_params: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.ir.transforms.drop_unused_params import drop_unused_params

BEFORE = """
schedule s implements row_sum
target sm_90a
param BM = 16 in {16, 32}
param BN = 64 in {64, 128}
param UNUSED = 2 in 1 .. 4
dims M, N
tensor x: in f32[M, N]
tensor y: out f32[M]
grid i in cdiv(M, BM)
role main: warps 4 {
  let acc: f32[BM] = 0
  for j in 0 .. cdiv(N, BN) {
    acc = acc + sum(load x[i*BM : +BM, j*BN : +BN] masked, axis=1)
  }
  store acc -> y[i*BM : +BM] masked
}
"""

EXPECTED = BEFORE.replace("param UNUSED = 2 in 1 .. 4\n", "")


def test_an_unreferenced_param_is_dropped() -> None:
    assert drop_unused_params(parse(BEFORE)) == parse(EXPECTED)


def test_nothing_to_drop_is_none() -> None:
    assert drop_unused_params(parse(EXPECTED)) is None
