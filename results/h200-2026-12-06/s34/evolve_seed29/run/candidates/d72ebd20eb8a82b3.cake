schedule assign_plain implements kmeans_assign
target sm_90a

dtype T in {f32, f16, bf16}
param BN = 128 in {32, 64, 128, 256}
param BK = 64 in {16, 32, 64, 128}
param STAGES = 2 in 1 .. 6
param WARPS = 2 in {2, 4, 8}
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]

grid tile in cdiv(N, BN), b in B

role main: warps WARPS {
  let xt: T[BN, D] = load x[b, tile * BN : +BN, :] masked other 0
  let best: f32[BN] = inf
  let besti: i32[BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    let ct: T[BK, D] = load c[b, k * BK : +BK, :] masked other 0
    let cf: f32[BK, D] = cast(ct, f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    let dot: f32[BN, BK] = mma(xt, ct.T) via dot
    let col: i32[BK] = k * BK + arange(BK)
    let dist: f32[BN, BK] = where(col[None, :] < K, csq[None, :] - 2 * dot, inf)
    let m: f32[BN] = min(dist, axis=1)
    let i: i32[BN] = argmin(dist, axis=1) + k * BK
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }
  store besti -> ids[b, tile * BN : +BN] masked
}

defer main best, besti
