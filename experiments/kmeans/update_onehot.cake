# Deterministic kmeans update: c_new[b, k] = mean of the points assigned to k (fp32 accumulation); a cluster
# with no points keeps c_old[b, k]. Each CTA owns BK centroids of one batch and walks every point tile in a
# fixed order: sums += onehot(ids == k) @ x on the tensor cores, counts += the one-hot's row sums. No
# atomics, so the bits are the same on every run (ORD-02), and no fp32 atomic flushes a subnormal sum to
# zero (EXC-02) — the two gates an atomic scatter fails on a GPU.
# A product with a one-hot would turn one point's Inf into 0 * Inf = NaN in every other cluster of its
# tile, so the product runs on the finite values only, and two more one-hot products count, per centroid
# and feature, the +Inf-or-NaN and the -Inf-or-NaN values: both present gives NaN (NaN, or Inf - Inf), one
# gives its infinity, as an IEEE sum would.
# The price is K/BK passes over x and three times 2*B*N*K*D tensor-core flops instead of one memory-bound
# pass: this schedule buys exactness and run-to-run identical bits, not speed.
schedule update_onehot implements kmeans_update
target sm_90a

dtype T in {f32, f16, bf16}
param BK = 64 in {32, 64, 128}
param BN = 64 in {32, 64, 128}
param STAGES = 2 in 1 .. 5
param WARPS = 4 in {2, 4, 8}
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor ids: in i64[B, N]
tensor c_old: in T[B, K, D]
tensor c_new: out T[B, K, D]

grid kt in cdiv(K, BK), b in B

role main: warps WARPS {
  let mine: i64[BK] = cast(kt*BK + arange(BK), i64)
  let sums: f32[BK, D] = 0.0
  let cnt: f32[BK] = 0.0
  let up: f32[BK, D] = 0.0
  let down: f32[BK, D] = 0.0
  for nt in 0 .. cdiv(N, BN) pipelined STAGES as s {
    # Rows past N read id -1, which no centroid matches: they add nothing anywhere.
    let k: i64[BN] = load ids[b, nt*BN : +BN] masked other -1
    let xt: T[BN, D] = load x[b, nt*BN : +BN, :] masked other 0
    let hot: T[BK, BN] = cast(where(mine[:, None] == k[None, :], 1.0, 0.0), T)
    let nan: bool[BN, D] = xt != xt
    let finite: T[BN, D] = cast(where(nan | (xt == inf) | (xt == -inf), 0.0, xt), T)
    sums = sums + mma(hot, finite) via dot
    up = up + mma(hot, cast(where(nan | (xt == inf), 1.0, 0.0), T)) via dot
    down = down + mma(hot, cast(where(nan | (xt == -inf), 1.0, 0.0), T)) via dot
    cnt = cnt + sum(cast(hot, f32), axis=1)
  }
  let old: f32[BK, D] = cast(load c_old[b, kt*BK : +BK, :] masked other 0, f32)
  # maximum(cnt, 1) keeps empty clusters from dividing by zero; `where` then discards that quotient.
  let mean: f32[BK, D] = sums / maximum(cnt, 1.0)[:, None]
  let special: f32[BK, D] = where((up > 0.0) & (down > 0.0), inf - inf, where(up > 0.0, inf, -inf))
  let value: f32[BK, D] = where((up > 0.0) | (down > 0.0), special, mean)
  store cast(where(cnt[:, None] > 0.0, value, old), T) -> c_new[b, kt*BK : +BK, :] masked
}
