"""fit_consumer_regs: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.ir.transforms.fit_consumer_regs import consumer_budget, fit_consumer_regs

BEFORE = """
schedule s implements row_sum
target sm_90a
param P = 40 in {24, 40, 56}
param C = 24 in {24, 152, 232, 240}
dims M, N
tensor x: in f16[M, N]
tensor y: out f32[M]
grid i in cdiv(M, 64)
smem xs: f16[64, 64] swizzle 128B
role producer: warpgroups 1, regs P {
  copy x[i*64 : +64, 0 : +64] -> xs via load masked
}
role consumer[w in 3]: warpgroups 1, regs C {
  let acc: f32[64, 64] = mma(xs, xs.T) via wgmma.m64n64k16
  store sum(acc, axis=1) -> y[i*64 : +64] masked
}
"""


def test_a_param_budget_moves_its_default_to_what_the_register_file_leaves() -> None:
    # (65,536 - 128 x 40) / (3 x 128) = 157 -> 152, the largest setmaxnreg count that fits
    assert consumer_budget(parse(BEFORE)) == 152
    assert fit_consumer_regs(parse(BEFORE)) == parse(BEFORE.replace("param C = 24", "param C = 152"))


def test_a_literal_budget_is_rewritten() -> None:
    literal = BEFORE.replace("regs C", "regs 24")
    assert fit_consumer_regs(parse(literal)) == parse(literal.replace("regs 24", "regs 152"))


def test_fitted_or_without_setmaxnreg_is_nothing_to_do() -> None:
    assert fit_consumer_regs(parse(BEFORE.replace("param C = 24", "param C = 152"))) is None
    assert fit_consumer_regs(parse(BEFORE.replace("target sm_90a", "target sm_80"))) is None
    assert fit_consumer_regs(parse(BEFORE.replace(", regs P", ""))) is None  # the copy role's budget is unknown
