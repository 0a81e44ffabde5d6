# Kmeans assign for Blackwell (sm_100a). Each CTA owns 2 x 128 points. A TMA producer warp streams
# centroid tiles into a shared-memory ring; a single mma-issuer warp runs tcgen05 products into tensor
# memory, one accumulator per (point half, stage); two consumer warpgroups read their accumulator out of
# TMEM and do the distance/argmin on CUDA cores. The MMA of tile k+1 runs while the consumers reduce
# tile k, which is what keeps the tensor cores busy despite the argmin. ||c||^2 comes from a first launch.
schedule assign_tcgen05 implements kmeans_assign
target sm_100a

dtype T in {f16, bf16}
# BK is the instruction's N (m128n128k16 below), so it is pinned; the rows per MMA are the 128 TMEM lanes.
param BK = 128 in {128}
# Accumulators take 2 x STAGES x BK fp32 columns of the 512 TMEM columns: two stages at BK = 128.
param STAGES = 2 in {2}
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
scratch csq_g: f32[B, K] = 0

launch centroid_norms {
  grid kt in cdiv(K, 64), b in B
  role main: warps 4 {
    let cf: f32[64, D] = cast(load c[b, kt*64 : +64, :] masked other 0, f32)
    store sum(cf * cf, axis=1) -> csq_g[b, kt*64 : +64] masked
  }
}

launch assign {
  grid tile in cdiv(N, 256), b in B
  smem xs[2]: T[128, D] swizzle 128B
  smem cs[STAGES]: T[BK, D] swizzle 128B
  smem csq[STAGES]: f32[BK]
  # acc_t[w*STAGES + s]: consumer w's accumulator for stage s.
  tmem acc_t[2*STAGES]: f32[128, BK]
  mbarrier x_full[2] arrivals 1 tx 128*D*sizeof(T)
  mbarrier c_full[STAGES] arrivals 1 tx BK*D*sizeof(T) + BK*4
  # A stage is free once both consumers have read its accumulator and its ||c||^2 (which also frees its
  # TMEM: the issuer only refills it after the producer's next c_full) and the issuer has moved on. The
  # consumers' arrivals already imply the MMA finished reading cs[s]; the issuer's own arrival states
  # that ownership in the text, where the checker can see it.
  mbarrier c_empty[STAGES] arrivals 3 free
  # tcgen05.commit arrives once the MMA has written TMEM.
  mbarrier acc_full[2*STAGES] arrivals 1

  role producer: warps 1 {
    for w in 0 .. 2 {
      copy x[b, tile*256 + w*128 : +128, :] -> xs[w] via tma masked signals x_full[w]
    }
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_empty[s]
      copy c[b, k*BK : +BK, :] -> cs[s] via tma masked signals c_full[s]
      copy csq_g[b, k*BK : +BK] -> csq[s] via tma masked signals c_full[s]
    }
  }

  # One thread issues tcgen05; a whole warp is reserved so the issuer never waits behind argmin math.
  role mma_issuer: warps 1 {
    wait x_full[0]
    wait x_full[1]
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait c_full[s]
      mma xs[0], cs[s].T -> acc_t[s] via tcgen05.m128n128k16 signals acc_full[s]
      mma xs[1], cs[s].T -> acc_t[STAGES + s] via tcgen05.m128n128k16 signals acc_full[STAGES + s]
      arrive c_empty[s]
    }
  }

  # A warpgroup's four warps together reach all 128 TMEM lanes, one point per lane.
  role consumer[w in 2]: warpgroups 1 {
    let best: f32[128] = inf
    let besti: i32[128] = 0
    for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
      wait acc_full[w*STAGES + s]
      let dot: f32[128, BK] = load acc_t[w*STAGES + s]
      let cn: f32[BK] = csq[s]
      arrive c_empty[s]
      let col: i32[BK] = k*BK + arange(BK)
      # TMA zero-fills centroids past K; they must never win.
      let dist: f32[128, BK] = where(col[None, :] < K, cn[None, :] - 2 * dot, inf)
      let m: f32[128] = min(dist, axis=1)
      let i: i32[128] = argmin(dist, axis=1) + k*BK
      besti = where(m < best, i, besti)
      best = minimum(m, best)
    }
    store besti -> ids[b, tile*256 + w*128 : +128] masked
  }
}
