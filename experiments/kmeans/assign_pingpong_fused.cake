# Warp-specialized ping-pong assign for Hopper in ONE launch. A TMA producer warpgroup feeds two consumer
# warpgroups; each consumer owns BN points of a 2*BN-point tile. The consumers take turns on the tensor cores, so one
# warpgroup's distance/argmin math overlaps the other's wgmma.
# Unlike assign_pingpong.cake, ||c||^2 is not precomputed by a first launch: each consumer sums the squares of the
# centroid tile it already holds in shared memory, beside its argmin (a reduction over D of [BK, D] bf16/f16 values,
# one warp per centroid). The work is redundant (both consumers sum the same tile) but it sits in the phase where a
# consumer waits for its turn on the tensor cores, and it removes a launch, the f32[B, K] scratch and its TMA copy:
# a serving call issues one kernel (issue 15's host path) instead of two.
# Measured on the H200 (session 8, scripts/gpu/s8_call1.sh; results/h200-2026-12-02/s8-calls/): gated in bf16 and
# fp16 under seeds 0 and 1, and one launch does bring the exported out-variant's host time to 8.1 us [6.3, 8.5]
# (three processes) — but the kernel takes 3.388 ms at the cell against the two-launch ping-pong's 1.140 ms
# (0.453x vs 1.411x of flash-kmeans, three rounds each). The CUDA backend lowers this row sum as it lowers any
# reduction of a tile no mma lays out (`coop_reduce`: one warp per centroid, lanes across D, five shuffles and a
# shared-memory write per centroid, two role barriers per k-step): about 4x the cycles of the wgmma it was meant to
# hide behind. Since then (CUDA codegen version 2) a sum of whole warps' worth of outputs is warp-transposed: lanes
# across 32 centroids at once, then a 31-shuffle butterfly (`warp_transposed_sum`). Session 9 (s9_call1.sh, same
# method): 1.887 ms, 0.814x [0.814, 0.815] against the two-launch 1.410x [1.403, 1.413]; gated again (bf16, fp16,
# seeds 0 1); host time of the exported out-variant 8.5 us [6.5, 8.7]. Deferring the wgmma's wait past the row sum
# (s9_call3.sh, reverted) gave only 0.833x: the sum does not wait on the tensor cores, it competes with the other
# consumer's epilogue for issue slots (both consumers sum every tile; 16-bit scalar shared loads at swizzled
# addresses, 128 a lane). What is left: ||c||^2 once per tile (split between the consumers, or by the idle producer
# warpgroup into a shared stage) with 16-byte loads. Not exported until it is as fast as the two-launch ping-pong.
# Since CUDA codegen version 4 (session 10) the consumers' row sum here is one centroid row per lane with 16-byte
# loads too (assign_pingpong_prodnorm.cake measured 1.735 -> 1.268 ms with that change); this schedule was not re-timed.
schedule assign_pingpong_fused implements kmeans_assign
target sm_90a

dtype T in {f16, bf16}
param BN = 128 in {64, 128}
param BK = 128 in {64, 128, 256}
param STAGES = 4 in 2 .. 7
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]

launch assign {
  grid persistent tile in cdiv(N, 2*BN), b in B
  smem xs[2]: T[BN, D] swizzle 128B
  smem cs[STAGES]: T[BK, D] swizzle 128B
  mbarrier x_full[2] arrivals 1 tx BN*D*sizeof(T)
  mbarrier x_empty[2] arrivals 1 free
  mbarrier c_full[STAGES] arrivals 1 tx BK*D*sizeof(T)
  mbarrier c_empty[STAGES] arrivals 2 free

  role producer: warpgroups 1, regs 40 {
    for w in 0 .. 2 {
      wait x_empty[w]
      copy x[b, tile*2*BN + w*BN : +BN, :] -> xs[w] via tma masked signals x_full[w]
    }
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_empty[s]
      copy c[b, k*BK : +BK, :] -> cs[s] via tma masked signals c_full[s]
    }
  }

  role consumer[w in 2]: warpgroups 1, regs 232 {
    wait x_full[w]
    let best: f32[BN] = inf
    let besti: i32[BN] = 0
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_full[s]
      let dot: f32[BN, BK] = mma(xs[w], cs[s].T) via wgmma.m64n128k16
      let cf: f32[BK, D] = cast(cs[s], f32)
      let cn: f32[BK] = sum(cf * cf, axis=1)
      arrive c_empty[s]
      let col: i32[BK] = k*BK + arange(BK)
      let dist: f32[BN, BK] = where(col[None, :] < K, cn[None, :] - 2 * dot, inf)
      let m: f32[BN] = min(dist, axis=1)
      let i: i32[BN] = argmin(dist, axis=1) + k*BK
      besti = where(m < best, i, besti)
      best = minimum(m, best)
    }
    arrive x_empty[w]
    store besti -> ids[b, tile*2*BN + w*BN : +BN] masked
  }

  pingpong consumer around mma
}
