schedule assign_plain implements kmeans_assign
target sm_90a

dtype T in {f16, bf16}
param BN = 256 in {64, 128, 256}
param BK = 64 in {16, 32, 64, 128}
param STAGES = 2 in 1 .. 6
param PRODUCER_REGS = 104 in {24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248}
param CONSUMER_REGS = 200 in {24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248}
param CONSUMERS = 2 in 2 .. 8
param HOIST_WARPS = 1 in {1, 2, 4, 8, 16, 32}
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
scratch csq_g: f32[B, K] = 0

launch precompute_csq {
  grid k in cdiv(K, BK), b in B

  role main: warps HOIST_WARPS {
    let tile: T[BK, D] = load c[b, k * BK : +BK, :] masked other 0
    let cf: f32[BK, D] = cast(tile, f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    store csq -> csq_g[b, k * BK : +BK] masked
  }
}

launch main {
  grid tile in cdiv(cdiv(N, BN), CONSUMERS), b in B
  smem xt_s[CONSUMERS]: T[BN, D] swizzle 128B
  smem ct_s[STAGES]: T[BK, D] swizzle 128B
  smem csq_s[STAGES]: f32[BK]
  mbarrier xt_full[CONSUMERS] arrivals 1 tx BN * D * sizeof(T)
  mbarrier xt_empty[CONSUMERS] arrivals 1 free
  mbarrier full[STAGES] arrivals 1 tx BK * D * sizeof(T) + BK * 4
  mbarrier empty[STAGES] arrivals CONSUMERS free

  role producer: warpgroups 1, regs PRODUCER_REGS {
    for w in 0 .. CONSUMERS {
      wait xt_empty[w]
      copy x[b, (tile * CONSUMERS + w) * BN : +BN, :] -> xt_s[w] via tma masked signals xt_full[w]
    }
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait empty[s]
      copy c[b, k * BK : +BK, :] -> ct_s[s] via tma masked signals full[s]
      copy csq_g[b, k * BK : +BK] -> csq_s[s] via tma masked signals full[s]
    }
  }

  role consumer[w in CONSUMERS]: warpgroups 1, regs CONSUMER_REGS {
    wait xt_full[w]
    let best: f32[BN] = inf
    let besti: i32[BN] = 0
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait full[s]
      let csq: f32[BK] = csq_s[s]
      let dot: f32[BN, BK] = mma(xt_s[w], ct_s[s].T) via wgmma.m64n64k16
      arrive empty[s]
      let col: i32[BK] = k * BK + arange(BK)
      let dist: f32[BN, BK] = where(col[None, :] < K, csq[None, :] - 2 * dot, inf)
      let m: f32[BN] = min(dist, axis=1)
      let i: i32[BN] = argmin(dist, axis=1) + k * BK
      besti = where(m < best, i, besti)
      best = minimum(m, best)
    }
    arrive xt_empty[w]
    store besti -> ids[b, (tile * CONSUMERS + w) * BN : +BN] masked
  }

  pingpong consumer around mma
}
