# RMSNorm over the last dim: y = x * rsqrt(mean(x*x) + 1e-6) * w, computed in fp32 and stored in x's
# dtype. A first pass accumulates the sum of squares in column tiles (so any row length fits), a second
# pass scales; w is reloaded per tile, which L2 serves since every CTA reads the same vector.
schedule rmsnorm implements rmsnorm
target sm_90a

dtype T in {f32, f16, bf16}
param BM = 4 in {1, 2, 4, 8, 16}
param BN = 1024 in {256, 512, 1024, 2048, 4096}
param WARPS = 4 in {1, 2, 4, 8}
dims M, N

tensor x: in T[M, N]
tensor w: in T[N]
tensor y: out T[M, N]

grid i in cdiv(M, BM)

role main: warps WARPS {
  let ss: f32[BM] = 0.0
  for j in 0 .. cdiv(N, BN) {
    # Zeros past N add nothing to the sum of squares.
    let xt: f32[BM, BN] = cast(load x[i*BM : +BM, j*BN : +BN] masked other 0, f32)
    ss = ss + sum(xt * xt, axis=1)
  }
  # The mean divides by the true N, not by the padded tile width.
  let r: f32[BM] = rsqrt(ss / cast(N, f32) + 1.0e-6)
  for j in 0 .. cdiv(N, BN) {
    let xt: f32[BM, BN] = cast(load x[i*BM : +BM, j*BN : +BN] masked other 0, f32)
    let wt: f32[BN] = cast(load w[j*BN : +BN] masked other 0, f32)
    store cast(xt * r[:, None] * wt[None, :], T) -> y[i*BM : +BM, j*BN : +BN] masked
  }
}
