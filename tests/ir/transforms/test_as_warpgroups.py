"""as_warpgroups: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.ir.transforms.as_warpgroups import as_warpgroups

BEFORE = """
schedule s implements row_sum
target sm_90a
param WARPS = 8 in {4, 6, 8}
dims M, N
tensor x: in f32[M, N]
tensor y: out f32[M]
grid i in cdiv(M, 64)
role main: warps WARPS {
  store sum(load x[i*64 : +64, 0 : +64] masked, axis=1) -> y[i*64 : +64] masked
}
"""


def test_warps_become_whole_warpgroups_at_the_defaults() -> None:
    expected = BEFORE.replace("role main: warps WARPS", "role main: warpgroups 2")
    assert as_warpgroups(parse(BEFORE), "main") == parse(expected)


def test_a_partial_warpgroup_cannot_be_regrouped() -> None:
    assert as_warpgroups(parse(BEFORE.replace("param WARPS = 8", "param WARPS = 6")), "main") is None


def test_already_warpgroups_or_no_such_role_is_nothing_to_do() -> None:
    grouped = parse(BEFORE.replace("role main: warps WARPS", "role main: warpgroups 1"))
    assert as_warpgroups(grouped, "main") is None
    assert as_warpgroups(parse(BEFORE), "producer") is None
