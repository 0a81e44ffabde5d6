"""split_consumer: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.ir.transforms.split_consumer import split_consumer

BEFORE = """
schedule s implements kmeans_assign
target sm_90a
dtype T in {f16, bf16}
param BN = 128 in {64, 128}
param BK = 64 in {64, 128}
param STAGES = 2 in 1 .. 4
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
role producer: warpgroups 1, regs 40 {
  wait xt_empty
  copy x[b, tile * BN : +BN, :] -> xt_s via tma masked signals xt_full
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait empty[s]
    copy c[b, k * BK : +BK, :] -> ct_s[s] via tma masked signals full[s]
  }
}
role consumer: warpgroups 1, regs 232 {
  wait xt_full
  let best: f32[BN] = inf
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait full[s]
    let dot: f32[BN, BK] = mma(xt_s, ct_s[s].T) via wgmma.m64n64k16
    arrive empty[s]
    best = minimum(min(dot, axis=1), best)
  }
  arrive xt_empty
  store cast(best, i32) -> ids[b, tile * BN : +BN] masked
}
"""

# CONSUMERS replicas (2 .. the 1024-thread block limit less the producer, in warpgroups of 128: 7) each own a
# BN slice of a CONSUMERS*BN tile; the point buffer and its barriers become one per replica, filled by a
# producer loop; `empty` expects one arrival per replica; the wgmma consumers ping-pong; the consumers'
# literal budget is refitted to what 2 x 128 threads can take beside the producer's 128 x 40.
EXPECTED = """
schedule s implements kmeans_assign
target sm_90a
dtype T in {f16, bf16}
param BN = 128 in {64, 128}
param BK = 64 in {64, 128}
param STAGES = 2 in 1 .. 4
param CONSUMERS = 2 in 2 .. 8
dims B, N, K, static D
tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
grid tile in cdiv(cdiv(N, BN), CONSUMERS), b in B
smem xt_s[CONSUMERS]: T[BN, D] swizzle 128B
smem ct_s[STAGES]: T[BK, D] swizzle 128B
mbarrier xt_full[CONSUMERS] arrivals 1 tx BN * D * sizeof(T)
mbarrier xt_empty[CONSUMERS] arrivals 1 free
mbarrier full[STAGES] arrivals 1 tx BK * D * sizeof(T)
mbarrier empty[STAGES] arrivals CONSUMERS free
role producer: warpgroups 1, regs 40 {
  for w in 0 .. CONSUMERS {
    wait xt_empty[w]
    copy x[b, (tile * CONSUMERS + w) * BN : +BN, :] -> xt_s[w] via tma masked signals xt_full[w]
  }
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait empty[s]
    copy c[b, k * BK : +BK, :] -> ct_s[s] via tma masked signals full[s]
  }
}
role consumer[w in CONSUMERS]: warpgroups 1, regs 232 {
  wait xt_full[w]
  let best: f32[BN] = inf
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait full[s]
    let dot: f32[BN, BK] = mma(xt_s[w], ct_s[s].T) via wgmma.m64n64k16
    arrive empty[s]
    best = minimum(min(dot, axis=1), best)
  }
  arrive xt_empty[w]
  store cast(best, i32) -> ids[b, (tile * CONSUMERS + w) * BN : +BN] masked
}
pingpong consumer around mma
"""


def test_the_mma_role_becomes_consumers_replicas_over_a_taller_tile() -> None:
    assert split_consumer(parse(BEFORE)) == parse(EXPECTED)


def test_replicated_or_without_an_mma_role_is_nothing_to_do() -> None:
    assert split_consumer(parse(EXPECTED)) is None
    no_mma = BEFORE.replace("mma(xt_s, ct_s[s].T) via wgmma.m64n64k16", "xt_s[:, 0 : +BK] * 1.0")
    assert split_consumer(parse(no_mma)) is None
