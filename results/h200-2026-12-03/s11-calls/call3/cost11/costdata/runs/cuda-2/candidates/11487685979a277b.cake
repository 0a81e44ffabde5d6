schedule assign_pingpong_x2 implements kmeans_assign
target sm_90a

dtype T in {f16, bf16}
param BN = 128 in {64, 128}
param BK = 64 in {64, 128, 256}
param STAGES = 2 in 2 .. 7
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
scratch csq_g: f32[B, K] = 0

launch centroid_norms {
  grid kt in cdiv(K, 64), b in B

  role main: warps 4 {
    let cf: f32[64, D] = cast(load c[b, kt * 64 : +64, :] masked other 0, f32)
    store sum(cf * cf, axis=1) -> csq_g[b, kt * 64 : +64] masked
  }
}

launch assign {
  grid persistent tile in cdiv(N, 4 * BN), b in B
  smem xa[2]: T[BN, D] swizzle 128B
  smem xb[2]: T[BN, D] swizzle 128B
  smem ca[STAGES]: T[BK, D] swizzle 128B
  smem cb[STAGES]: T[BK, D] swizzle 128B
  smem csqa[STAGES]: f32[BK]
  smem csqb[STAGES]: f32[BK]
  mbarrier xa_full[2] arrivals 1 tx BN * D * sizeof(T)
  mbarrier xa_empty[2] arrivals 1 free
  mbarrier xb_full[2] arrivals 1 tx BN * D * sizeof(T)
  mbarrier xb_empty[2] arrivals 1 free
  mbarrier ca_full[STAGES] arrivals 1 tx BK * D * sizeof(T) + BK * 4
  mbarrier ca_empty[STAGES] arrivals 2 free
  mbarrier cb_full[STAGES] arrivals 1 tx BK * D * sizeof(T) + BK * 4
  mbarrier cb_empty[STAGES] arrivals 2 free

  role producer: warpgroups 1, regs 40 {
    for w in 0 .. 2 {
      wait xa_empty[w]
      copy x[b, tile * 4 * BN + w * BN : +BN, :] -> xa[w] via tma masked signals xa_full[w]
    }
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait ca_empty[s]
      copy c[b, k * BK : +BK, :] -> ca[s] via tma masked signals ca_full[s]
      copy csq_g[b, k * BK : +BK] -> csqa[s] via tma masked signals ca_full[s]
    }
    for w in 0 .. 2 {
      wait xb_empty[w]
      copy x[b, tile * 4 * BN + 2 * BN + w * BN : +BN, :] -> xb[w] via tma masked signals xb_full[w]
    }
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait cb_empty[s]
      copy c[b, k * BK : +BK, :] -> cb[s] via tma masked signals cb_full[s]
      copy csq_g[b, k * BK : +BK] -> csqb[s] via tma masked signals cb_full[s]
    }
  }

  role consumer[w in 2]: warpgroups 1, regs 232 {
    wait xa_full[w]
    let besta: f32[BN] = inf
    let bestia: i32[BN] = 0
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait ca_full[s]
      let dot: f32[BN, BK] = mma(xa[w], ca[s].T) via wgmma.m64n64k16
      let cn: f32[BK] = csqa[s]
      arrive ca_empty[s]
      let col: i32[BK] = k * BK + arange(BK)
      let dist: f32[BN, BK] = where(col[None, :] < K, cn[None, :] - 2 * dot, inf)
      let m: f32[BN] = min(dist, axis=1)
      let i: i32[BN] = argmin(dist, axis=1) + k * BK
      bestia = where(m < besta, i, bestia)
      besta = minimum(m, besta)
    }
    arrive xa_empty[w]
    store bestia -> ids[b, tile * 4 * BN + w * BN : +BN] masked
    wait xb_full[w]
    let bestb: f32[BN] = inf
    let bestib: i32[BN] = 0
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait cb_full[s]
      let dot: f32[BN, BK] = mma(xb[w], cb[s].T) via wgmma.m64n64k16
      let cn: f32[BK] = csqb[s]
      arrive cb_empty[s]
      let col: i32[BK] = k * BK + arange(BK)
      let dist: f32[BN, BK] = where(col[None, :] < K, cn[None, :] - 2 * dot, inf)
      let m: f32[BN] = min(dist, axis=1)
      let i: i32[BN] = argmin(dist, axis=1) + k * BK
      bestib = where(m < bestb, i, bestib)
      bestb = minimum(m, bestb)
    }
    arrive xb_empty[w]
    store bestib -> ids[b, tile * 4 * BN + 2 * BN + w * BN : +BN] masked
  }

  pingpong consumer around mma
}
