schedule assign_plain implements kmeans_assign
target sm_90a

dtype T in {f16, bf16}
param BN = 256 in {64, 128, 256}
param BK = 64 in {16, 32, 64, 128}
param STAGES = 1 in 1 .. 6
param PRODUCER_REGS = 24 in {24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248}
param CONSUMER_REGS = 248 in {24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248}
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

role producer: warpgroups 1, regs PRODUCER_REGS {
  wait xt_empty
  copy x[b, tile * BN : +BN, :] -> xt_s via tma masked signals xt_full
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait empty[s]
    copy c[b, k * BK : +BK, :] -> ct_s[s] via tma masked signals full[s]
  }
}

role consumer: warpgroups 1, regs CONSUMER_REGS {
  wait xt_full
  let best: f32[BN] = inf
  let besti: i32[BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait full[s]
    let cf: f32[BK, D] = cast(ct_s[s], f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    let dot: f32[BN, BK] = mma(xt_s, ct_s[s].T) via wgmma.m64n64k16
    arrive empty[s]
    let col: i32[BK] = k * BK + arange(BK)
    let dist: f32[BN, BK] = where(col[None, :] < K, csq[None, :] - 2 * dot, inf)
    let m: f32[BN] = min(dist, axis=1)
    let i: i32[BN] = argmin(dist, axis=1) + k * BK
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }
  arrive xt_empty
  store besti -> ids[b, tile * BN : +BN] masked
}

defer main best, besti
