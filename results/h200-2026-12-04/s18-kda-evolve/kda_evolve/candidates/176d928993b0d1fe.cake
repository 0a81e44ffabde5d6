schedule kda_fused_chunkpar implements kda_forward
target sm_90a

dtype E in {f32, f16, bf16}
param C = 32 in {16, 32}
param BV = 32 in {16, 32, 64, 128}
param BK = 16 in {16, 32, 64, 128}
param WARPS_INTRA = 4 in {1, 2, 4, 8}
param REGS_INTRA = 128 in {128, 168, 255}
param STAGES_INTRA = 1 in {1, 2, 3}
param WARPS_RECUR = 4 in {1, 2, 4, 8}
param STAGES_RECUR = 1 in {1, 2, 3}
param REGS_RECUR = 168 in {128, 168, 255}
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
scratch ws: f32[B, T, H, K] = 0
scratch us: f32[B, T, H, V] = 0
scratch kls: f32[B, T, H, K] = 0
scratch qds: E[B, T, H, K] = 0
scratch ps: E[B, T, H, C] = 0
scratch gls: f32[B, cdiv(T, C), H, K] = 0

launch intra {
  grid t in cdiv(T, C), h in H, b in B

  role main: warps WARPS_INTRA, regs REGS_INTRA {
    let row: i32[C] = arange(C)
    let live: bool[C] = t * C + row < T
    let rate: f32 = sum(exp(load A_log[h : +1] masked other 0), axis=0)
    let bl: f32[C] = cast(load beta[b, t * C : +C, h] masked other 0, f32)
    let bc: f32[C] = where(live, 1.0 / (1.0 + exp(-bl)), 0.0)
    let qr: f32[C, K] = cast(load q[b, t * C : +C, h, :] masked other 0, f32)
    let qn: f32[C] = rsqrt(sum(qr * qr, axis=1) + 1e-06)
    let kr: f32[C, K] = cast(load k[b, t * C : +C, h, :] masked other 0, f32)
    let kn: f32[C] = rsqrt(sum(kr * kr, axis=1) + 1e-06)
    let A: f32[C, C] = 0.0
    let P: f32[C, C] = 0.0
    for kk in 0 .. cdiv(K, BK) pipelined STAGES_INTRA as s {
      let bias: f32[BK] = load dt_bias[h, kk * BK : +BK] masked other 0
      let graw: f32[C, BK] = cast(load g[b, t * C : +C, h, kk * BK : +BK] masked other 0, f32)
      let gc: f32[C, BK] = cumsum(where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0), axis=0)
      let glast: f32[BK] = sum(where(row[:, None] == C - 1, gc, 0.0), axis=0)
      let gr: f32[BK] = sum(where(row[:, None] == C // 2 - 1, gc, 0.0), axis=0)
      store exp(glast) -> gls[b, t, h, kk * BK : +BK] masked
      let kc: f32[C, BK] = cast(load k[b, t * C : +C, h, kk * BK : +BK] masked other 0, f32) * kn[:, None]
      store kc * exp(glast[None, :] - gc) -> kls[b, t * C : +C, h, kk * BK : +BK] masked
      let kdn: f32[C, BK] = kc * exp(gr[None, :] - gc)
      A = mma(kc * exp(gc - gr[None, :]), kdn.T, A) via dot.tf32x3
      let qc: f32[C, BK] = cast(load q[b, t * C : +C, h, kk * BK : +BK] masked other 0, f32) * qn[:, None]
      store cast(qc * exp(gc), E) -> qds[b, t * C : +C, h, kk * BK : +BK] masked
      P = mma(qc * exp(gc - gr[None, :]), kdn.T, P) via dot.tf32x3
    }
    store cast(where(row[:, None] >= row[None, :], P, 0.0), E) -> ps[b, t * C : +C, h, :] masked
    A = where(row[:, None] > row[None, :], bc[:, None] * A, 0.0)
    let Tm: f32[C, C] = where(row[:, None] == row[None, :], 1.0, where(row[:, None] == row[None, :] + 1 & row[:, None] % 2 == 1, -A, 0.0))
    let width: i32 = 2
    for level in 1 .. 4 + C // 32 {
      let pair: bool[C, C] = row[:, None] // (2 * width) == row[None, :] // (2 * width)
      let L: f32[C, C] = where(pair & row[:, None] // width > row[None, :] // width, A, 0.0)
      Tm = Tm - mma(mma(Tm, L) via dot.tf32x3, Tm) via dot.tf32x3
      width = width * 2
    }
    for kk in 0 .. cdiv(K, BK) pipelined STAGES_INTRA as s {
      let bias: f32[BK] = load dt_bias[h, kk * BK : +BK] masked other 0
      let graw: f32[C, BK] = cast(load g[b, t * C : +C, h, kk * BK : +BK] masked other 0, f32)
      let gc: f32[C, BK] = cumsum(where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0), axis=0)
      let kc: f32[C, BK] = cast(load k[b, t * C : +C, h, kk * BK : +BK] masked other 0, f32) * kn[:, None]
      store mma(Tm, bc[:, None] * kc * exp(gc)) via dot.tf32x3 -> ws[b, t * C : +C, h, kk * BK : +BK] masked
    }
    let vc: f32[C, V] = cast(load v[b, t * C : +C, h, :] masked other 0, f32)
    store mma(Tm, bc[:, None] * vc) via dot.tf32x3 -> us[b, t * C : +C, h, :] masked
  }
}

launch recur {
  grid vt in cdiv(V, BV), h in H, b in B

  role main: warps WARPS_RECUR, regs REGS_RECUR {
    let scale: f32 = rsqrt(cast(K, f32))
    let ST: f32[BV, K] = (load h0[b, h, :, vt * BV : +BV] masked other 0).T
    for t in 0 .. cdiv(T, C) pipelined STAGES_RECUR as s {
      let w: f32[C, K] = load ws[b, t * C : +C, h, :] masked other 0
      let u: f32[C, BV] = load us[b, t * C : +C, h, vt * BV : +BV] masked other 0
      let vnT: f32[BV, C] = u.T - mma(ST, w.T) via dot.tf32x3
      let qd: E[C, K] = load qds[b, t * C : +C, h, :] masked other 0
      let P: E[C, C] = load ps[b, t * C : +C, h, :] masked other 0
      let oc: f32[C, BV] = scale * (mma(qd, cast(ST, E).T) via dot + mma(P, cast(vnT, E).T) via dot)
      store cast(oc, E) -> o[b, t * C : +C, h, vt * BV : +BV] masked
      let kl: f32[C, K] = load kls[b, t * C : +C, h, :] masked other 0
      let decay: f32[K] = load gls[b, t, h, :]
      ST = decay[None, :] * ST + mma(vnT, kl) via dot.tf32x3
    }
    store ST.T -> state[b, h, :, vt * BV : +BV] masked
  }
}
