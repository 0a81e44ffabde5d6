# Chunk-parallel fused Kimi Delta Attention forward (kda_forward: FlashKDA's benchmark semantics), in the
# structure of fla's chunk_kda: three launches that communicate through scratch buffers.
#   intra  — parallel over (chunk, head, batch): the fused preprocessing (q, k L2-normalized with eps 1e-6,
#            beta = sigmoid(logits), safe gate g = -5 sigmoid(exp(A_log[h]) (g_raw + dt_bias[h]))), the
#            cumulative log-decays gc of the chunk, the strictly lower A = beta (k e^gc)(k e^-gc)^T,
#            Tm = (I + A)^-1 by blockwise doubling, and everything the later launches read: the WY terms
#            w = Tm (beta k e^gc) and u = Tm (beta v), the keys decayed to the chunk's end kl = k e^(glast - gc)
#            with the chunk's decay e^glast, the decayed queries qd = q e^gc and the causal intra-chunk
#            attention P = (q e^gc)(k e^-gc)^T;
#   recur  — parallel over (V tile, head, batch), serial over chunks only for the [K, BV] state: it stores the
#            state entering each chunk and the corrected values vn = u - w S, then S <- e^glast S + kl^T vn;
#   output — parallel over (V tile, chunk, head, batch): o = K^-1/2 (qd S_prev + P vn).
# Intra-chunk decays are factored about the chunk's middle row r: e^(gc_i - gc_j) = e^(gc_i - gc_r) e^(gc_r - gc_j).
# The gate is >= -5, so each factor's exponent is at most 5 (C/2) <= 80 < 88 (fp32's exp limit) for C <= 32;
# A and P are formed in fp32 (an f16 operand would overflow at e^80). Above the diagonal the product of two
# such factors may overflow to inf (or inf - inf = NaN in the sum); `where` discards exactly those entries.
# Precision: everything that feeds the state recurrence — Tm, beta k e^gc, beta v, the WY terms w and u, the decayed
# keys kl, the corrected values vn and the state S itself — stays fp32 from the inputs to `state` (ws, us, kls are
# fp32 scratch), so final_state carries no rounding to the input dtype. Rounding any of them to bf16 costs a bf16
# ulp of |beta v| per token in the state, more than the kda_forward bf16 tolerance allowed at small T (seed 1's
# STREAM case, T = 1, K = 17, failed at 2.3x the tolerance with u rounded; the contract's chunked control, which
# rounds u and vn as fla does, fails that case too). The products of fp32 operands are `via dot.tf32x3`: three
# TF32 tensor-core products per product (about 2^-21 relative: 2^12 below a bf16 rounding, 2^3 above fp32's),
# not IEEE fp32 FMA dots: those ran on the CUDA cores and spilled 4.3 KB a thread inside recur's serial loop
# (60.6 of 67.4 ms at h96_fixed on the H200, session 5) and 1.7 KB in intra. Plain TF32 (2^-11) would round
# about as coarsely as the bf16 staging that failed. Only the output's operands are staged in the input dtype, as
# fla stages them: qd, P, vn (a copy in vns) and the state entering each chunk (hs), which o's final rounding to
# the input dtype dominates; their products are plain `via dot` on 16-bit operands.
# BV = 16 by default: 8 V tiles x H x B programs share each head's w and kl through L2, and at K = 128 it spills
# least in recur (32 bytes, against 300 at BV = 32, Triton 3.9 for sm_90a); the H200 has not ranked BV yet.
schedule kda_fused_chunkpar implements kda_forward
target sm_90a

dtype E in {f32, f16, bf16}
param C = 32 in {16, 32}
param BV = 16 in {16, 32, 64, 128}
param BVO = 64 in {16, 32, 64, 128}
# intra holds about ten [C, K] fp32 tiles at once: 8 warps keep them in registers at C = 32, K = 128
param WARPS_INTRA = 8 in {1, 2, 4, 8}
param WARPS_RECUR = 4 in {1, 2, 4, 8}
param WARPS_OUT = 4 in {1, 2, 4, 8}
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
# fp32: they feed the state recurrence (see the header)
scratch ws: f32[B, T, H, K] = 0
scratch us: f32[B, T, H, V] = 0
scratch kls: f32[B, T, H, K] = 0
scratch qds: E[B, T, H, K] = 0
scratch ps: E[B, T, H, C] = 0
scratch gls: f32[B, cdiv(T, C), H, K] = 0
scratch vns: E[B, T, H, V] = 0
# the state entering each chunk
scratch hs: E[B, H, cdiv(T, C), K, V] = 0

launch intra {
  grid t in cdiv(T, C), h in H, b in B
  role main: warps WARPS_INTRA {
    let row: i32[C] = arange(C)
    let live: bool[C] = t*C + row < T
    let rate: f32 = sum(exp(load A_log[h : +1] masked other 0), axis=0)
    let bias: f32[K] = load dt_bias[h, :]
    let qr: f32[C, K] = cast(load q[b, t*C : +C, h, :] masked other 0, f32)
    let kr: f32[C, K] = cast(load k[b, t*C : +C, h, :] masked other 0, f32)
    let qc: f32[C, K] = qr * rsqrt(sum(qr * qr, axis=1) + 1.0e-6)[:, None]
    let kc: f32[C, K] = kr * rsqrt(sum(kr * kr, axis=1) + 1.0e-6)[:, None]
    let vc: f32[C, V] = cast(load v[b, t*C : +C, h, :] masked other 0, f32)
    let bl: f32[C] = cast(load beta[b, t*C : +C, h] masked other 0, f32)
    let bc: f32[C] = where(live, 1.0 / (1.0 + exp(-bl)), 0.0)
    let graw: f32[C, K] = cast(load g[b, t*C : +C, h, :] masked other 0, f32)
    let gate: f32[C, K] = where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0)
    let gc: f32[C, K] = cumsum(gate, axis=0)
    # rows past T have gate 0, so gc is flat there and the last row is the whole chunk's decay
    let glast: f32[K] = sum(where(row[:, None] == C - 1, gc, 0.0), axis=0)
    let gr: f32[K] = sum(where(row[:, None] == C // 2 - 1, gc, 0.0), axis=0)
    let kup: f32[C, K] = kc * exp(gc - gr[None, :])
    let kdn: f32[C, K] = kc * exp(gr[None, :] - gc)
    let A: f32[C, C] = where(row[:, None] > row[None, :], bc[:, None] * mma(kup, kdn.T) via dot.tf32x3, 0.0)
    let P: f32[C, C] = where(row[:, None] >= row[None, :], mma(qc * exp(gc - gr[None, :]), kdn.T) via dot.tf32x3, 0.0)
    # Tm = (I + A)^-1 by recursive doubling over diagonal blocks (all rows at once, not row by row): with Tm the
    # inverse of (I + A)'s diagonal blocks of `width`, the blocks of 2 width are [[D1, 0], [L, D2]], whose
    # inverse is Tm - Tm L Tm (L: A's entries below the diagonal blocks of `width` inside those of 2 width).
    # Five doublings reach 32 >= C; each is exact algebra, as stable as block forward substitution.
    let Tm: f32[C, C] = where(row[:, None] == row[None, :], 1.0, 0.0)
    let width: i32 = 1
    for level in 0 .. 5 {
      let pair: bool[C, C] = row[:, None] // (2 * width) == row[None, :] // (2 * width)
      let L: f32[C, C] = where(pair & (row[:, None] // width > row[None, :] // width), A, 0.0)
      Tm = Tm - mma(mma(Tm, L) via dot.tf32x3, Tm) via dot.tf32x3
      width = width * 2
    }
    store mma(Tm, bc[:, None] * kc * exp(gc)) via dot.tf32x3 -> ws[b, t*C : +C, h, :] masked
    store mma(Tm, bc[:, None] * vc) via dot.tf32x3 -> us[b, t*C : +C, h, :] masked
    store kc * exp(glast[None, :] - gc) -> kls[b, t*C : +C, h, :] masked
    store cast(qc * exp(gc), E) -> qds[b, t*C : +C, h, :] masked
    store cast(P, E) -> ps[b, t*C : +C, h, :] masked
    store exp(glast) -> gls[b, t, h, :]
  }
}

launch recur {
  grid vt in cdiv(V, BV), h in H, b in B
  role main: warps WARPS_RECUR {
    let S: f32[K, BV] = load h0[b, h, :, vt*BV : +BV] masked other 0
    for t in 0 .. cdiv(T, C) {
      # the output's copies of S and vn are rounded to E; the recurrence goes on with the fp32 values
      store cast(S, E) -> hs[b, h, t, :, vt*BV : +BV] masked
      let w: f32[C, K] = load ws[b, t*C : +C, h, :] masked other 0
      let u: f32[C, BV] = load us[b, t*C : +C, h, vt*BV : +BV] masked other 0
      let vn: f32[C, BV] = u - mma(w, S) via dot.tf32x3
      store cast(vn, E) -> vns[b, t*C : +C, h, vt*BV : +BV] masked
      # rows past T read kl = 0: they add nothing to the state
      let kl: f32[C, K] = load kls[b, t*C : +C, h, :] masked other 0
      let decay: f32[K] = load gls[b, t, h, :]
      S = decay[:, None] * S + mma(kl.T, vn) via dot.tf32x3
    }
    store S -> state[b, h, :, vt*BV : +BV] masked
  }
}

launch output {
  grid vt in cdiv(V, BVO), t in cdiv(T, C), h in H, b in B
  role main: warps WARPS_OUT {
    let scale: f32 = rsqrt(cast(K, f32))
    let qd: E[C, K] = load qds[b, t*C : +C, h, :] masked other 0
    let P: E[C, C] = load ps[b, t*C : +C, h, :] masked other 0
    let sp: E[K, BVO] = load hs[b, h, t, :, vt*BVO : +BVO] masked other 0
    let vn: E[C, BVO] = load vns[b, t*C : +C, h, vt*BVO : +BVO] masked other 0
    let oc: f32[C, BVO] = scale * (mma(qd, sp) via dot + mma(P, vn) via dot)
    store cast(oc, E) -> o[b, t*C : +C, h, vt*BVO : +BVO] masked
  }
}
