# Warp-specialized ping-pong assign for Hopper in ONE launch, with ||c||^2 computed once per centroid tile by the
# producer warpgroup. A TMA producer feeds two consumer warpgroups that take turns on the tensor cores (as in
# assign_pingpong.cake); instead of a first launch writing ||c||^2 to global memory, the producer waits for each
# centroid stage it lands, sums the squares of its rows (over the 128 producer threads) and stores them into a shared stage `csq[s]`, then arrives on `csq_full[s]`; a consumer
# waits on both the TMA barrier and `csq_full` before its wgmma. The consumers do no ||c||^2 work at all, unlike
# assign_pingpong_fused.cake where both summed every tile beside their argmin (0.81x of flash-kmeans against the
# two-launch 1.41x, session 9). The cost moves to warps that were idle; what it may cost instead: the producer
# now waits for each stage to land before it issues the next, so the TMA lookahead is one stage (the stages
# still decouple the producer from the consumers), and the producer's row sum needed 56 registers (setmaxnreg;
# 48 spilled at codegen 2), which leaves the consumers 224 (232 in assign_pingpong.cake).
# Measured on the H200 (session 10, results/h200-2026-12-03/s10-calls/): first at 48 + 2 x 232 registers it hung —
# the consumers' setmaxnreg.inc asked for more than the producer released (the block holds 384 x 168 at launch, not
# the SM's 65,536): E0302 now checks that pool. At 56 + 2 x 224, CUDA codegen 2 (warp-transposed row sum, 2-byte
# loads): gated (bf16, fp16, seeds 0 1) and 0.883x [0.882, 0.883] of flash-kmeans (1.735 ms, 3 rounds) against the
# two-launch 1.414x [1.407, 1.416] (1.123 ms) — the producer, summing 128 2-byte loads a lane and waiting for each
# stage before the next copy, was the bottleneck. CUDA codegen 4 (one row per lane, 16-byte loads): 1.268 ms,
# 1.226x of flash-kmeans against the two-launch 1.413x (1.116 ms), one round, gated in bf16 under seed 0 only:
# 0.88x the two-launch kernel's speed, so not the exported default. Session 11 (3 rounds): 1.227x [1.226, 1.228]
# against the two-launch 1.414x [1.411, 1.414]; at 40 + 2 x 232 registers 1.222x, and with a warpgroup of its own for
# the sum (assign_pingpong_normwg.cake, every copy in flight) 1.218x: neither registers nor lookahead is the limit,
# the per-tile sum is. Its exported op's host time is 4.3 us a call (out-variant) against the two-launch 6.9 us.
schedule assign_pingpong_prodnorm implements kmeans_assign
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
  smem csq[STAGES]: f32[BK]
  mbarrier x_full[2] arrivals 1 tx BN*D*sizeof(T)
  mbarrier x_empty[2] arrivals 1 free
  mbarrier c_full[STAGES] arrivals 1 tx BK*D*sizeof(T)
  mbarrier csq_full[STAGES] arrivals 1
  mbarrier c_empty[STAGES] arrivals 2 free

  role producer: warpgroups 1, regs 56 {
    for w in 0 .. 2 {
      wait x_empty[w]
      copy x[b, tile*2*BN + w*BN : +BN, :] -> xs[w] via tma masked signals x_full[w]
    }
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_empty[s]
      copy c[b, k*BK : +BK, :] -> cs[s] via tma masked signals c_full[s]
      wait c_full[s]
      let cf: f32[BK, D] = cast(cs[s], f32)
      store sum(cf * cf, axis=1) -> csq[s]
      arrive csq_full[s]
    }
  }

  role consumer[w in 2]: warpgroups 1, regs 224 {
    wait x_full[w]
    let best: f32[BN] = inf
    let besti: i32[BN] = 0
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_full[s]
      wait csq_full[s]
      let dot: f32[BN, BK] = mma(xs[w], cs[s].T) via wgmma.m64n128k16
      let cn: f32[BK] = csq[s]
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
