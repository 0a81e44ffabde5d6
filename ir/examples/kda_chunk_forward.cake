# Chunked Kimi Delta Attention forward (the semantics of fla's naive_recurrent_kda, computed chunk-wise).
# One CTA per (batch, head) walks the sequence in chunks of C tokens, carrying the [DK, DV] state in
# registers. Per chunk: cumulative channel-wise log-decays, the intra-chunk matrix A = beta * (k e^gc)(k e^-gc)^T
# (strictly lower), its triangular solve T = (I + A)^-1 by forward substitution, the WY terms w = T (beta k e^gc)
# and u = T (beta v), the output (intra-chunk attention + the state's contribution) and the state recurrence.
# q arrives pre-scaled (fla applies DK^-0.5 inside naive_recurrent_kda).
# An expressiveness example: the Triton backend lowers it (`cake lower`). Its signature (q pre-scaled, no
# initial state) is no contract's, so its numbers are not checked here; the checked schedules derived from it
# are experiments/kda/kda_chunk16.cake, kda_chunk64.cake and kda_fused_chunk16.cake (issue 14).
schedule kda_chunk_forward implements kda_forward
target sm_90a

dtype T in {f16, bf16}
param C = 64 in {16, 32, 64}
param WARPS = 4 in {4, 8}
dims B, L, H, static DK, static DV

tensor q: in T[B, L, H, DK]
tensor k: in T[B, L, H, DK]
tensor v: in T[B, L, H, DV]
tensor g: in f32[B, L, H, DK]
tensor beta: in f32[B, L, H]
tensor o: out T[B, L, H, DV]
tensor state: out f32[B, H, DK, DV]

grid h in H, b in B

role main: warps WARPS {
  let S: f32[DK, DV] = 0
  let row: i32[C] = arange(C)
  for t in 0 .. cdiv(L, C) pipelined 2 as s {
    let qc: f32[C, DK] = cast(load q[b, t*C : +C, h, :] masked other 0, f32)
    let kc: f32[C, DK] = cast(load k[b, t*C : +C, h, :] masked other 0, f32)
    let vc: f32[C, DV] = cast(load v[b, t*C : +C, h, :] masked other 0, f32)
    let bc: f32[C] = load beta[b, t*C : +C, h] masked other 0
    let gc: f32[C, DK] = cumsum(load g[b, t*C : +C, h, :] masked other 0, axis=0)
    let glast: f32[DK] = sum(where(row[:, None] == C - 1, gc, 0.0), axis=0)
    let kd: f32[C, DK] = kc * exp(gc)
    let ki: f32[C, DK] = kc * exp(-gc)
    # intra-chunk: A[i, j] = beta_i * <k_i e^gc_i, k_j e^-gc_j> for j < i
    let A: f32[C, C] = where(row[:, None] > row[None, :], bc[:, None] * mma(kd, ki.T) via dot, 0.0)
    # triangular solve: T = (I + A)^-1, one row at a time (rows above i are final)
    let Tm: f32[C, C] = where(row[:, None] == row[None, :], 1.0, 0.0)
    for i in 1 .. C {
      let a_i: f32[C] = sum(where(row[:, None] == i, A, 0.0), axis=0)
      let r: f32[C] = where(row == i, 1.0, 0.0) - sum(a_i[:, None] * Tm, axis=0)
      Tm = where(row[:, None] == i, r[None, :], Tm)
    }
    let w: f32[C, DK] = mma(Tm, bc[:, None] * kd) via dot
    let u: f32[C, DV] = mma(Tm, bc[:, None] * vc) via dot
    # the state's contribution and the corrected values
    let vn: f32[C, DV] = u - mma(w, S) via dot
    let qd: f32[C, DK] = qc * exp(gc)
    let P: f32[C, C] = where(row[:, None] >= row[None, :], mma(qd, ki.T) via dot, 0.0)
    let oc: f32[C, DV] = mma(qd, S) via dot + mma(P, vn) via dot
    store cast(oc, T) -> o[b, t*C : +C, h, :] masked
    # inter-chunk recurrence: S <- diag(e^glast) S + (k e^(glast - gc))^T vn
    let kl: f32[C, DK] = kc * exp(glast[None, :] - gc)
    S = exp(glast)[:, None] * S + mma(kl.T, vn) via dot
  }
  store S -> state[b, h, :, :]
}
