"""free_copy_regs: Before/Expected in CAKE's own syntax, and the roles whose budget it leaves."""

from __future__ import annotations

import pytest
from cake.ir.parser import parse
from cake.ir.transforms.free_copy_regs import free_copy_regs

BEFORE = """
schedule s implements row_sum
target sm_90a
param P = 232 in {24, 32, 40, 232}
param C = 136 in {24, 136, 232, 240}
dims M, N
tensor x: in f16[M, N]
tensor y: out f32[M]
grid i in cdiv(M, 64)
smem xs: f16[64, 64] swizzle 128B
mbarrier full arrivals 1 tx 64*64*2
role producer: warpgroups 1, regs P {
  copy x[i*64 : +64, 0 : +64] -> xs via tma masked signals full
}
role consumer[w in 2]: warpgroups 1, regs C {
  wait full
  let acc: f32[64, 64] = mma(xs, xs.T) via wgmma.m64n64k16
  store sum(acc, axis=1) -> y[i*64 : +64] masked
}
"""


def test_a_copy_role_drops_to_setmaxnregs_minimum_and_the_consumers_take_the_rest() -> None:
    # (65,536 - 128 x 24) / (2 x 128) = 244 -> 240, the largest count of C's domain that fits
    expected = BEFORE.replace("param P = 232", "param P = 24").replace("param C = 136", "param C = 240")
    assert free_copy_regs(parse(BEFORE)) == parse(expected)


def test_a_literal_budget_is_rewritten_and_a_domain_without_the_minimum_stops_at_its_least_value() -> None:
    literal = BEFORE.replace("regs P", "regs 232")
    assert free_copy_regs(parse(literal)) == parse(
        literal.replace("regs 232", "regs 24").replace("param C = 136", "param C = 240"))
    no_minimum = BEFORE.replace("{24, 32, 40, 232}", "{40, 232}")
    assert free_copy_regs(parse(no_minimum)) == parse(
        no_minimum.replace("param P = 232", "param P = 40").replace("param C = 136", "param C = 232"))


@pytest.mark.parametrize("change, why", [
    (("param P = 232", "param P = 24"), "the copy role is at the minimum already"),
    (("  copy x[i*64 : +64, 0 : +64] -> xs via tma masked signals full\n",
      "  let t: f32[64] = 0\n  copy x[i*64 : +64, 0 : +64] -> xs via tma masked signals full\n"),
     "the copy role binds a tile: what it needs is not known"),
    (("regs P {", "regs C {"), "the budget is a param an mma role reads too"),
    (("target sm_90a", "target sm_80"), "no setmaxnreg"),
])
def test_nothing_to_do(change: tuple[str, str], why: str) -> None:
    assert free_copy_regs(parse(BEFORE.replace(*change))) is None, why
