# Row softmax over the last dim, for any row length: an online pass keeps a running max and a running sum
# of exp(x - max) per row (rescaling the sum whenever the max grows), then a second pass writes
# exp(x - max) / sum. Two reads of x and one write, with no row-length limit on registers.
schedule softmax implements softmax
target sm_90a

dtype T in {f32, f16, bf16}
param BM = 4 in {1, 2, 4, 8, 16}
param BN = 1024 in {256, 512, 1024, 2048, 4096}
param WARPS = 4 in {1, 2, 4, 8}
dims M, N

tensor x: in T[M, N]
tensor y: out T[M, N]

grid i in cdiv(M, BM)

role main: warps WARPS {
  let m: f32[BM] = -inf
  let l: f32[BM] = 0.0
  for j in 0 .. cdiv(N, BN) {
    # Columns past N read -inf, so they add exp(-inf) = 0 to the sum and never raise the max.
    let xt: f32[BM, BN] = cast(load x[i*BM : +BM, j*BN : +BN] masked other -inf, f32)
    let m_new: f32[BM] = maximum(m, max(xt, axis=1))
    # While a row has seen only -inf, subtract 0 instead: -inf - -inf would turn the row into NaN even
    # when later columns are finite.
    let shift: f32[BM] = where(m_new == -inf, 0.0, m_new)
    l = l * exp(m - shift) + sum(exp(xt - shift[:, None]), axis=1)
    m = m_new
  }
  let shift: f32[BM] = where(m == -inf, 0.0, m)
  for j in 0 .. cdiv(N, BN) {
    let xt: f32[BM, BN] = cast(load x[i*BM : +BM, j*BN : +BN] masked other -inf, f32)
    # A row of only -inf gives 0 / 0 = NaN, as the reference does.
    store cast(exp(xt - shift[:, None]) / l[:, None], T) -> y[i*BM : +BM, j*BN : +BN] masked
  }
}
