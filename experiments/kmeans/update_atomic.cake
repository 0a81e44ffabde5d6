# Kmeans update: c_new[b, k] = mean of the points assigned to k (fp32 accumulation); a cluster with no
# points keeps c_old[b, k]. The op is memory-bound, so it is two plain launches: one pass over the points
# scatters fp32 sums and counts with atomics (no sort of the ids), then one pass over the centroids divides.
# Atomic fp32 adds commute only up to rounding: bits may differ between runs (the contract's tolerance
# covers the value; a byte-identical-runs gate will see the difference).
schedule update_atomic implements kmeans_update
target sm_90a

dtype T in {f32, f16, bf16}
param BN = 64 in {32, 64, 128, 256}
param BK = 32 in {16, 32, 64}
param WARPS = 4 in {2, 4, 8}
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor ids: in i64[B, N]
tensor c_old: in T[B, K, D]
tensor c_new: out T[B, K, D]
# Zeroed before the first launch on every call, so repeated calls never see a previous call's sums.
scratch sums: f32[B, K, D] = 0
scratch counts: f32[B, K] = 0

launch scatter {
  grid tile in cdiv(N, BN), b in B
  role main: warps WARPS {
    let row: i32[BN] = tile*BN + arange(BN)
    let xt: f32[BN, D] = cast(load x[b, tile*BN : +BN, :] masked other 0, f32)
    # Rows past N read id 0 and zero features; they add 0 to cluster 0's sums and, through `live`, 0 to its
    # count, so no index has to be invented for them.
    let k: i64[BN] = load ids[b, tile*BN : +BN] masked other 0
    let live: f32[BN] = where(row < N, 1.0, 0.0)
    atomic add xt -> sums[b, k, :] masked
    atomic add live -> counts[b, k] masked
  }
}

launch finalize {
  grid kt in cdiv(K, BK), b in B
  role main: warps WARPS {
    let cnt: f32[BK] = load counts[b, kt*BK : +BK] masked other 0
    let total: f32[BK, D] = load sums[b, kt*BK : +BK, :] masked other 0
    let old: f32[BK, D] = cast(load c_old[b, kt*BK : +BK, :] masked other 0, f32)
    # maximum(cnt, 1) keeps empty clusters from dividing by zero; `where` then discards that quotient.
    let mean: f32[BK, D] = total / maximum(cnt, 1.0)[:, None]
    store cast(where(cnt[:, None] > 0.0, mean, old), T) -> c_new[b, kt*BK : +BK, :] masked
  }
}
