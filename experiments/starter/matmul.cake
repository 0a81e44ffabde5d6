# Tiled matmul c = a @ b: each CTA owns a BM x BN tile of c and walks K in BK steps, accumulating in fp32
# on the tensor cores; the result is stored in a's dtype. The backend picks the instruction (`via dot`);
# for fp32 inputs it must keep full fp32 precision (TF32 rounding breaks the contract).
schedule matmul implements matmul
target sm_90a

dtype T in {f32, f16, bf16}
param BM = 128 in {32, 64, 128, 256}
param BN = 128 in {32, 64, 128, 256}
param BK = 64 in {16, 32, 64, 128}
param STAGES = 3 in 1 .. 6
param WARPS = 4 in {2, 4, 8}
dims M, N, K

tensor a: in T[M, K]
tensor b: in T[K, N]
tensor c: out T[M, N]

grid tm in cdiv(M, BM), tn in cdiv(N, BN)

role main: warps WARPS {
  let acc: f32[BM, BN] = 0.0
  # Loads for the next STAGES-1 K steps are in flight while this step multiplies.
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    # Zeros past K (and past M, N) contribute nothing to the product.
    let at: T[BM, BK] = load a[tm*BM : +BM, k*BK : +BK] masked other 0
    let bt: T[BK, BN] = load b[k*BK : +BK, tn*BN : +BN] masked other 0
    acc = mma(at, bt, acc) via dot
  }
  store cast(acc, T) -> c[tm*BM : +BM, tn*BN : +BN] masked
}
