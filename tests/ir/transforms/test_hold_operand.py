"""hold_operand: Before/Expected in CAKE's own syntax, compared structurally, and where it does not apply."""

from __future__ import annotations

import pytest
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.hold_operand import hold_operand, holdable

BEFORE = """
schedule s implements kmeans_assign
target sm_90a
dtype T in {f16, bf16}
param STAGES = 2 in 2 .. 4
dims B, N, K, static D
tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
grid tile in cdiv(N, 64), b in B
smem xs: T[64, D] swizzle 128B
smem cs[STAGES]: T[64, D] swizzle 128B
mbarrier x_full arrivals 1 tx 64*D*sizeof(T)
mbarrier c_full[STAGES] arrivals 1 tx 64*D*sizeof(T)
mbarrier c_empty[STAGES] arrivals 1 free
role producer: warpgroups 1, regs 40 {
  copy x[b, tile*64 : +64, :] -> xs via tma masked signals x_full
  for k in 0 .. cdiv(K, 64) pipelined STAGES as s {
    wait c_empty[s]
    copy c[b, k*64 : +64, :] -> cs[s] via tma masked signals c_full[s]
  }
}
role consumer: warpgroups 1, regs 232 {
  wait x_full
  let best: f32[64] = inf
  let besti: i32[64] = 0
  for k in 0 .. cdiv(K, 64) pipelined STAGES as s {
    wait c_full[s]
    let dot: f32[64, 64] = mma(xs, cs[s].T) via wgmma.m64n64k16
    arrive c_empty[s]
    let m: f32[64] = min(-2 * dot, axis=1)
    let i: i32[64] = argmin(-2 * dot, axis=1) + k*64
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }
  store besti -> ids[b, tile*64 : +64] masked
}
"""

EXPECTED = BEFORE.replace("""    let dot: f32[64, 64] = mma(xs, cs[s].T) via wgmma.m64n64k16""",
                          """    let dot: f32[64, 64] = mma(xs_regs, cs[s].T) via wgmma.m64n64k16""").replace(
    """  for k in 0 .. cdiv(K, 64) pipelined STAGES as s {
    wait c_full[s]""", """  let xs_regs: T[64, D] = xs
  for k in 0 .. cdiv(K, 64) pipelined STAGES as s {
    wait c_full[s]""")


def test_the_loop_invariant_a_stage_is_read_once_into_registers_before_the_loop() -> None:
    assert holdable(parse(BEFORE)) == ("dot",)
    out = hold_operand(parse(BEFORE))
    assert out == parse(EXPECTED)
    assert not [d for d in check(out, backend="cuda", dims={"D": 128}) if d.severity.value == "error"]
    assert hold_operand(out) is None  # held already: nothing left to do


@pytest.mark.parametrize("change, why", [
    (("mma(xs, cs[s].T)", "mma(cs[s], cs[s].T)"), "A moves with the loop's stage"),
    (("via wgmma.m64n64k16", "via dot"), "`dot` is not a form that takes A from registers"),
    (("target sm_90a", "target sm_80"), "no wgmma on the target"),
])
def test_nothing_to_do_where_a_is_not_a_loop_invariant_register_capable_operand(change: tuple[str, str],
                                                                                why: str) -> None:
    kernel = parse(BEFORE.replace(*change))
    assert holdable(kernel) == (), why
    assert hold_operand(kernel) is None, why


def test_a_stage_the_loop_writes_is_not_held() -> None:
    written = BEFORE.replace("    wait c_full[s]\n", "    wait c_full[s]\n    copy x[b, tile*64 : +64, :] -> xs via load masked\n", 1)
    assert hold_operand(parse(written)) is None


RELEASED = BEFORE.replace("mbarrier x_full arrivals 1 tx 64*D*sizeof(T)\n",
                          "mbarrier x_full arrivals 1 tx 64*D*sizeof(T)\nmbarrier x_empty arrivals 1 free\n").replace(
    "  copy x[b, tile*64 : +64, :] -> xs via tma masked signals x_full\n",
    "  wait x_empty\n  copy x[b, tile*64 : +64, :] -> xs via tma masked signals x_full\n").replace(
    "  }\n  store besti", "  }\n  arrive x_empty\n  store besti")


def test_the_release_of_the_held_stage_moves_to_right_after_its_last_read() -> None:
    # x_empty frees xs (the producer waits on it before each copy into xs); once held, nothing reads xs after the
    # `let`, so the consumer releases it there and the producer's next copy overlaps the loop.
    out = hold_operand(parse(RELEASED))
    expected = EXPECTED.replace("mbarrier x_full arrivals 1 tx 64*D*sizeof(T)\n",
                                "mbarrier x_full arrivals 1 tx 64*D*sizeof(T)\nmbarrier x_empty arrivals 1 free\n").replace(
        "  copy x[b, tile*64 : +64, :] -> xs via tma masked signals x_full\n",
        "  wait x_empty\n  copy x[b, tile*64 : +64, :] -> xs via tma masked signals x_full\n").replace(
        "  let xs_regs: T[64, D] = xs\n", "  let xs_regs: T[64, D] = xs\n  arrive x_empty\n")
    assert out == parse(expected)
    assert not [d for d in check(out, backend="cuda", dims={"D": 128}) if d.severity.value == "error"]


def test_a_stage_still_read_after_the_let_keeps_its_release_where_it_was() -> None:
    read_late = RELEASED.replace("  }\n  arrive x_empty", "  }\n  let x0: f32[64] = sum(cast(xs, f32), axis=1)\n  arrive x_empty")
    out = hold_operand(parse(read_late))
    assert out is not None
    consumer = print_kernel(out).split("role consumer", 1)[1]
    assert "let xs_regs: T[64, D] = xs\n  for k" in consumer
    assert consumer.index("arrive x_empty") > consumer.index("let x0")


def test_mma_sync_is_not_held() -> None:
    # mma.sync always takes A from registers; the CUDA backend reads a let-bound stage at each product, so holding
    # (and moving the release ahead of those reads) would be a race, not a gain.
    sync = RELEASED.replace("via wgmma.m64n64k16", "via mma_sync.m16n8k16").replace("warpgroups 1, regs 232", "warps 4")
    assert holdable(parse(sync)) == ()
