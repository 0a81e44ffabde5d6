"""hoist_reduction: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.ir.transforms.hoist_reduction import hoist_reduction, hoistable, warp_counts

BEFORE = """
schedule s implements kmeans_assign
target sm_90a
dtype T in {f32, f16, bf16}
param BN = 128 in {64, 128}
param BK = 64 in {32, 64}
dims B, N, K, static D
tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
grid tile in cdiv(N, BN), b in B
role main: warps 4 {
  let xt: T[BN, D] = load x[b, tile*BN : +BN, :] masked other 0
  let best: f32[BN] = inf
  for k in 0 .. cdiv(K, BK) {
    let ct: T[BK, D] = load c[b, k*BK : +BK, :] masked other 0
    let cf: f32[BK, D] = cast(ct, f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    let dot: f32[BN, BK] = mma(xt, ct.T) via dot
    best = minimum(min(csq[None, :] - 2 * dot, axis=1), best)
  }
  store cast(best, i32) -> ids[b, tile*BN : +BN] masked
}
"""

# ||c||^2 depends on the centroid tile alone: a first launch computes it once per tile (the loop's own BK
# rows, HOIST_WARPS warps over sm_90a's power-of-two warp counts, one warpgroup to start) into `csq_g`,
# and the loop reads it back; the cast it needed goes with it.
EXPECTED = """
schedule s implements kmeans_assign
target sm_90a
dtype T in {f32, f16, bf16}
param BN = 128 in {64, 128}
param BK = 64 in {32, 64}
param HOIST_WARPS = 4 in {1, 2, 4, 8, 16, 32}
dims B, N, K, static D
tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
scratch csq_g: f32[B, K] = 0
launch precompute_csq {
  grid k in cdiv(K, BK), b in B
  role main: warps HOIST_WARPS {
    let ct: T[BK, D] = load c[b, k * BK : +BK, :] masked other 0
    let cf: f32[BK, D] = cast(ct, f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    store csq -> csq_g[b, k * BK : +BK] masked
  }
}
launch main {
  grid tile in cdiv(N, BN), b in B
  role main: warps 4 {
    let xt: T[BN, D] = load x[b, tile * BN : +BN, :] masked other 0
    let best: f32[BN] = inf
    for k in 0 .. cdiv(K, BK) {
      let ct: T[BK, D] = load c[b, k * BK : +BK, :] masked other 0
      let csq: f32[BK] = load csq_g[b, k * BK : +BK] masked other 0
      let dot: f32[BN, BK] = mma(xt, ct.T) via dot
      best = minimum(min(csq[None, :] - 2 * dot, axis=1), best)
    }
    store cast(best, i32) -> ids[b, tile * BN : +BN] masked
  }
}
"""


def test_an_operand_only_reduction_moves_to_a_launch_of_its_own() -> None:
    assert hoistable(parse(BEFORE)) == ("csq",)
    assert hoist_reduction(parse(BEFORE)) == parse(EXPECTED)
    assert hoist_reduction(parse(BEFORE), "csq") == parse(EXPECTED)


def test_a_reduction_that_reads_the_other_operand_stays() -> None:
    mixed = BEFORE.replace("sum(cf * cf, axis=1)", "sum(cf * cf, axis=1) + min(cast(xt, f32), axis=1)[0 : +BK]")
    assert hoist_reduction(parse(mixed)) is None
    assert hoist_reduction(parse(BEFORE), "dot") is None
    assert hoist_reduction(parse(EXPECTED)) is None


def test_warp_counts_come_from_the_block_limit() -> None:
    assert warp_counts(parse(BEFORE)) == (1, 2, 4, 8, 16, 32)
