schedule kda_fused_chunk16 implements kda_forward
target sm_90a

dtype E in {f32, f16, bf16}
param C = 16 in {16}
param WARPS = 4 in {1, 2, 4, 8}
dims B, T, H, static K, static V

tensor q: in E[B, T, H, K]
tensor k: in E[B, T, H, K]
tensor v: in E[B, T, H, V]
tensor g: in E[B, T, H, K]
tensor beta: in E[B, T, H]
tensor A_log: in f32[H]
tensor dt_bias: in f32[H, K]
tensor h0: in f32[B, H, K, V]
tensor o: out E[B, T, H, V]
tensor state: out f32[B, H, K, V]

grid h in H, b in B

role main: warps WARPS {
  let S: f32[K, V] = load h0[b, h, :, :]
  let row: i32[C] = arange(C)
  let scale: f32 = rsqrt(cast(K, f32))
  let rate: f32 = sum(exp(load A_log[h : +1] masked other 0), axis=0)
  let bias: f32[K] = load dt_bias[h, :]
  for t in 0 .. cdiv(T, C) {
    let live: bool[C] = t * C + row < T
    let qr: f32[C, K] = cast(load q[b, t * C : +C, h, :] masked other 0, f32)
    let kr: f32[C, K] = cast(load k[b, t * C : +C, h, :] masked other 0, f32)
    let qc: f32[C, K] = qr * rsqrt(sum(qr * qr, axis=1) + 1e-06)[:, None]
    let kc: f32[C, K] = kr * rsqrt(sum(kr * kr, axis=1) + 1e-06)[:, None]
    let vc: f32[C, V] = cast(load v[b, t * C : +C, h, :] masked other 0, f32)
    let bl: f32[C] = cast(load beta[b, t * C : +C, h] masked other 0, f32)
    let bc: f32[C] = where(live, 1.0 / (1.0 + exp(-bl)), 0.0)
    let graw: f32[C, K] = cast(load g[b, t * C : +C, h, :] masked other 0, f32)
    let gate: f32[C, K] = where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0)
    let gc: f32[C, K] = cumsum(gate, axis=0)
    let glast: f32[K] = sum(where(row[:, None] == C - 1, gc, 0.0), axis=0)
    let kd: f32[C, K] = kc * exp(gc)
    let ki: f32[C, K] = kc * exp(-gc)
    let A: f32[C, C] = where(row[:, None] > row[None, :], bc[:, None] * mma(kd, ki.T) via dot, 0.0)
    let Tm: f32[C, C] = where(row[:, None] == row[None, :], 1.0, 0.0)
    for i in 1 .. C {
      let a_i: f32[C] = sum(where(row[:, None] == i, A, 0.0), axis=0)
      let r: f32[C] = where(row == i, 1.0, 0.0) - sum(a_i[:, None] * Tm, axis=0)
      Tm = where(row[:, None] == i, r[None, :], Tm)
    }
    let w: f32[C, K] = mma(Tm, bc[:, None] * kd) via dot
    let u: f32[C, V] = mma(Tm, bc[:, None] * vc) via dot
    let vn: f32[C, V] = u - mma(w, S) via dot
    let qd: f32[C, K] = qc * exp(gc)
    let P: f32[C, C] = where(row[:, None] >= row[None, :], mma(qd, ki.T) via dot, 0.0)
    let oc: f32[C, V] = scale * (mma(qd, S) via dot + mma(P, vn) via dot)
    store cast(oc, E) -> o[b, t * C : +C, h, :] masked
    let kl: f32[C, K] = where(live[:, None], kc * exp(glast[None, :] - gc), 0.0)
    S = exp(glast)[:, None] * S + mma(kl.T, vn) via dot
  }
  store S -> state[b, h, :, :]
}
