# Kmeans assign for Ampere (sm_80): no TMA and no wgmma, so centroid tiles stream through a multi-stage
# cp.async pipeline in shared memory while the warps run mma.sync on the tile copied STAGES-1 iterations
# earlier. One CTA owns BN points, whose tile stays in registers for the whole centroid sweep.
schedule assign_cp_async implements kmeans_assign
target sm_80

dtype T in {f16, bf16}                       # mma.sync m16n8k16 takes 16-bit operands only
param BN = 128 in {64, 128}
param BK = 64 in {32, 64, 128}
param STAGES = 3 in 2 .. 6                   # sm_80 has 163 KB of shared memory: room for 3-5 stages at D=128
param WARPS = 8 in {4, 8}
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]

grid tile in cdiv(N, BN), b in B
# 128B swizzle keeps the ldmatrix reads of a centroid tile free of bank conflicts.
smem cs[STAGES]: T[BK, D] swizzle 128B

role main: warps WARPS {
  let xt: T[BN, D] = load x[b, tile*BN : +BN, :] masked other 0
  let best: f32[BN] = inf
  let besti: i32[BN] = 0
  # The copy of tile k is issued STAGES-1 iterations ahead; the compiler derives cp.async.wait_group from
  # the pipelined loop, so the read of cs[s] below sees a landed tile.
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    copy c[b, k*BK : +BK, :] -> cs[s] via cp_async masked
    let ct: T[BK, D] = cs[s]
    # ||c||^2 is recomputed per CTA: BK*D extra flops per BN*BK*D product, and no second launch.
    let cf: f32[BK, D] = cast(ct, f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    let dot: f32[BN, BK] = mma(xt, ct.T) via mma_sync.m16n8k16
    let col: i32[BK] = k*BK + arange(BK)
    # Masked copies read zeros past K; those columns must never win the argmin.
    let dist: f32[BN, BK] = where(col[None, :] < K, csq[None, :] - 2 * dot, inf)
    let m: f32[BN] = min(dist, axis=1)
    let i: i32[BN] = argmin(dist, axis=1) + k*BK
    # Strict `<` keeps the earlier (lower) index on ties, like the reference's first-index argmin.
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }
  store besti -> ids[b, tile*BN : +BN] masked
}
