schedule assign_pingpong_rs implements kmeans_assign
target sm_90a

dtype T in {f16, bf16}
param BN = 128 in {64, 128}
param BK = 128 in {64, 128, 256}
param STAGES = 4 in 2 .. 7
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
  grid persistent tile in cdiv(N, 2 * BN), b in B
  smem xs[2]: T[BN, D] swizzle 128B
  smem cs[STAGES]: T[BK, D] swizzle 128B
  smem csq[STAGES]: f32[BK]
  mbarrier x_full[2] arrivals 1 tx BN * D * sizeof(T)
  mbarrier x_empty[2] arrivals 1 free
  mbarrier c_full[STAGES] arrivals 1 tx BK * D * sizeof(T) + BK * 4
  mbarrier c_empty[STAGES] arrivals 2 free

  role producer: warpgroups 1, regs 40 {
    for w in 0 .. 2 {
      wait x_empty[w]
      copy x[b, tile * 2 * BN + w * BN : +BN, :] -> xs[w] via tma masked signals x_full[w]
    }
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_empty[s]
      copy c[b, k * BK : +BK, :] -> cs[s] via tma masked signals c_full[s]
      copy csq_g[b, k * BK : +BK] -> csq[s] via tma masked signals c_full[s]
    }
  }

  role consumer[w in 2]: warpgroups 1, regs 232 {
    wait x_full[w]
    let xa: T[BN, D] = xs[w]
    arrive x_empty[w]
    let best: f32[BN] = inf
    let besti: i32[BN] = 0
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_full[s]
      let dot: f32[BN, BK] = mma(xa, cs[s].T) via wgmma.m64n128k16
      let cn: f32[BK] = csq[s]
      arrive c_empty[s]
      let col: i32[BK] = k * BK + arange(BK)
      let dist: f32[BN, BK] = where(col[None, :] < K, cn[None, :] - 2 * dot, inf)
      let m: f32[BN] = min(dist, axis=1)
      let i: i32[BN] = argmin(dist, axis=1) + k * BK
      besti = where(m < best, i, besti)
      best = minimum(m, best)
    }
    store besti -> ids[b, tile * 2 * BN + w * BN : +BN] masked
  }

  pingpong consumer around mma
}
