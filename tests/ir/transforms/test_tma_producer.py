"""tma_producer: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.transforms.tma_producer import tma_producer
from cake.ir.visit import walk_stmts

from cake.arch import arch

_SPEC = arch("sm_90a")
BUDGETS = ", ".join(str(v) for v in _SPEC.setmaxnreg_values if v <= _SPEC.registers_per_thread_max)

BEFORE = """
schedule s implements kmeans_assign
target sm_90a
dtype T in {f32, f16, bf16}
param BN = 128 in {64, 96, 128}
param BK = 64 in {32, 64, 96, 128}
param STAGES = 2 in 1 .. 4
dims B, N, K, static D
tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
grid tile in cdiv(N, BN), b in B
role main: warps 4 {
  let xt: T[BN, D] = load x[b, tile*BN : +BN, :] masked other 0
  let best: f32[BN] = inf
  let besti: i32[BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    let ct: T[BK, D] = load c[b, k*BK : +BK, :] masked other 0
    let cf: f32[BK, D] = cast(ct, f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    let dot: f32[BN, BK] = mma(xt, ct.T) via dot
    let dist: f32[BN, BK] = csq[None, :] - 2 * dot
    let m: f32[BN] = min(dist, axis=1)
    let i: i32[BN] = argmin(dist, axis=1) + k*BK
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }
  store besti -> ids[b, tile*BN : +BN] masked
}
"""

# The point tile and the centroid stages move to shared memory behind full/empty barriers; the mma, whose
# operands now are shared tiles, is committed to wgmma (BN keeps the multiples of 64, T loses f32); the
# register split is two params over sm_90a's setmaxnreg counts, the consumer's fitted to what is left.
EXPECTED = f"""
schedule s implements kmeans_assign
target sm_90a
dtype T in {{f16, bf16}}
param BN = 128 in {{64, 128}}
param BK = 64 in {{32, 64, 96, 128}}
param STAGES = 2 in 1 .. 4
param PRODUCER_REGS = 24 in {{{BUDGETS}}}
param CONSUMER_REGS = 248 in {{{BUDGETS}}}
dims B, N, K, static D
tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
grid tile in cdiv(N, BN), b in B
smem xt_s: T[BN, D] swizzle 128B
smem ct_s[STAGES]: T[BK, D] swizzle 128B
mbarrier xt_full arrivals 1 tx BN * D * sizeof(T)
mbarrier xt_empty arrivals 1 free
mbarrier full[STAGES] arrivals 1 tx BK * D * sizeof(T)
mbarrier empty[STAGES] arrivals 1 free
role producer: warpgroups 1, regs PRODUCER_REGS {{
  wait xt_empty
  copy x[b, tile * BN : +BN, :] -> xt_s via tma masked signals xt_full
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {{
    wait empty[s]
    copy c[b, k * BK : +BK, :] -> ct_s[s] via tma masked signals full[s]
  }}
}}
role consumer: warpgroups 1, regs CONSUMER_REGS {{
  wait xt_full
  let best: f32[BN] = inf
  let besti: i32[BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {{
    wait full[s]
    let cf: f32[BK, D] = cast(ct_s[s], f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    let dot: f32[BN, BK] = mma(xt_s, ct_s[s].T) via wgmma.m64n64k16
    arrive empty[s]
    let dist: f32[BN, BK] = csq[None, :] - 2 * dot
    let m: f32[BN] = min(dist, axis=1)
    let i: i32[BN] = argmin(dist, axis=1) + k * BK
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }}
  arrive xt_empty
  store besti -> ids[b, tile * BN : +BN] masked
}}
"""


def test_a_pipelined_role_becomes_a_tma_producer_and_a_wgmma_consumer() -> None:
    assert tma_producer(parse(BEFORE)) == parse(EXPECTED)


def test_without_setmaxnreg_or_wgmma_the_roles_keep_warps_and_the_mma_its_form() -> None:
    out = tma_producer(parse(BEFORE.replace("target sm_90a", "target sm_90")))
    assert out is not None and out.param("PRODUCER_REGS") is None and out.param("CONSUMER_REGS") is None
    roles = {r.name: r for r in out.launches[0].roles}
    assert roles["producer"].regs is None and roles["consumer"].units == parse(BEFORE).launches[0].roles[0].units
    forms = {s.value.form for s in walk_stmts(roles["consumer"].body) if isinstance(getattr(s, "value", None), n.Mma)}
    assert forms == {"dot"}


def test_no_pipelined_loop_or_already_split_is_nothing_to_do() -> None:
    assert tma_producer(parse(BEFORE.replace(" pipelined STAGES as s", ""))) is None
    assert tma_producer(parse(EXPECTED)) is None
