# Row sum over the last dim with an fp32 accumulator whatever the input dtype (a 16-bit running sum loses
# the small terms of long rows); the result is stored in the input's dtype, as the contract asks.
schedule row_sum implements row_sum
target sm_90a

dtype T in {f32, f16, bf16}
param BM = 16 in {1, 4, 8, 16, 32, 64}
param BN = 256 in {64, 128, 256, 512, 1024}
param STAGES = 2 in 1 .. 5
param WARPS = 4 in {1, 2, 4, 8}
dims M, N

tensor x: in T[M, N]
tensor y: out T[M]

grid i in cdiv(M, BM)

role main: warps WARPS {
  let acc: f32[BM] = 0.0
  # Pipelining overlaps the next tile's load with this tile's sum: the op is bandwidth-bound.
  for j in 0 .. cdiv(N, BN) pipelined STAGES as s {
    let xt: f32[BM, BN] = cast(load x[i*BM : +BM, j*BN : +BN] masked other 0, f32)
    acc = acc + sum(xt, axis=1)
  }
  store cast(acc, T) -> y[i*BM : +BM] masked
}
