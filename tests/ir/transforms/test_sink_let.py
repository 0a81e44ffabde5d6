"""sink_let: Before/Expected in CAKE's own syntax, and where a let must stay."""

from __future__ import annotations

import pytest
from cake.ir.parser import parse
from cake.ir.transforms.sink_let import lets_past_mma, sink_let, sink_past_mma, sinkable

BEFORE = """
schedule s implements row_sum
target sm_90a
param STAGES = 2 in 2 .. 4
dims M, N
tensor x: in f16[M, N]
tensor y: out f32[M]
grid i in cdiv(M, 64)
smem xs[STAGES]: f16[64, 64] swizzle 128B
smem cs[STAGES]: f32[64]
mbarrier full[STAGES] arrivals 1 tx 64*64*2 + 64*4
mbarrier empty[STAGES] arrivals 1 free
role producer: warpgroups 1, regs 40 {
  for k in 0 .. cdiv(N, 64) pipelined STAGES as s {
    wait empty[s]
    copy x[i*64 : +64, k*64 : +64] -> xs[s] via tma masked signals full[s]
    copy y[k*64 : +64] -> cs[s] via tma masked signals full[s]
  }
}
role consumer: warpgroups 1, regs 232 {
  let acc: f32[64] = 0
  for k in 0 .. cdiv(N, 64) pipelined STAGES as s {
    wait full[s]
    let cn: f32[64] = cs[s]
    let dot: f32[64, 64] = mma(xs[s], xs[s].T) via wgmma.m64n64k16
    arrive empty[s]
    acc = acc + sum(dot, axis=1) + cn
  }
  store acc -> y[i*64 : +64] masked
}
"""


def test_a_let_moves_past_what_does_not_use_it_and_stops_at_the_release() -> None:
    # `cn` passes the mma (which does not read it) and stops before `arrive empty[s]`: past it the stage may be refilled.
    expected = BEFORE.replace("    let cn: f32[64] = cs[s]\n    let dot: f32[64, 64] = mma(xs[s], xs[s].T) via wgmma.m64n64k16\n",
                              "    let dot: f32[64, 64] = mma(xs[s], xs[s].T) via wgmma.m64n64k16\n    let cn: f32[64] = cs[s]\n")
    assert "cn" in sinkable(parse(BEFORE))
    assert sink_let(parse(BEFORE), "cn") == parse(expected)


@pytest.mark.parametrize("name, why", [
    ("acc", "the next statement is a loop"),
    ("dot", "the next statement is the release"),
])
def test_a_let_that_cannot_move_is_left(name: str, why: str) -> None:
    assert name not in sinkable(parse(BEFORE)), why
    assert sink_let(parse(BEFORE), name) is None, why


def test_a_let_stops_before_its_first_use_and_before_a_write_to_what_it_reads() -> None:
    used = BEFORE.replace("    let dot: f32[64, 64] = mma(xs[s], xs[s].T) via wgmma.m64n64k16\n",
                          "    let twice: f32[64] = cn * 2\n    let dot: f32[64, 64] = mma(xs[s], xs[s].T) via wgmma.m64n64k16\n")
    assert sink_let(parse(used), "cn") is None  # the next statement reads it
    written = BEFORE.replace("  for k in 0 .. cdiv(N, 64) pipelined STAGES as s {\n    wait full[s]\n",
                             "  for k in 0 .. cdiv(N, 64) pipelined STAGES as s {\n    wait full[s]\n"
                             "    let seen: f32[64] = acc\n    acc = acc * 2\n", 1)
    assert sink_let(parse(written), "seen") is None  # the next statement assigns what it read


def test_sink_past_mma_moves_what_waits_across_the_product_and_nothing_else() -> None:
    # `cn` is computed before the mma and first read after it: it moves past it (as sink_let would). `acc`, which
    # sits before the loop, is not moved, and a kernel with nothing to move gives None.
    expected = BEFORE.replace("    let cn: f32[64] = cs[s]\n    let dot: f32[64, 64] = mma(xs[s], xs[s].T) via wgmma.m64n64k16\n",
                              "    let dot: f32[64, 64] = mma(xs[s], xs[s].T) via wgmma.m64n64k16\n    let cn: f32[64] = cs[s]\n")
    sunk = sink_past_mma(parse(BEFORE))
    assert sunk == parse(expected)
    assert sink_past_mma(sunk) is None and lets_past_mma(parse(BEFORE)) == ("cn",)


def test_sink_past_mma_leaves_a_let_whose_move_stops_before_the_mma() -> None:
    # a let followed by a release stops there: it never passes the mma after it, so nothing moves
    stops = BEFORE.replace("    let cn: f32[64] = cs[s]\n    let dot",
                           "    let cn: f32[64] = cs[s]\n    arrive empty[s]\n    let dot").replace(
        "    arrive empty[s]\n    acc", "    acc")
    assert sink_past_mma(parse(stops)) is None
