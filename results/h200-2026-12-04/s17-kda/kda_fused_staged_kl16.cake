# Chunk-parallel fused Kimi Delta Attention forward (kda_forward), staged: kda_fused_chunkpar.cake's two launches
# with what the state recurrence reads rounded to the input dtype where the contract's chunked control (and fla's
# chunk_kda) round it, so recur's products run on 16-bit tensor-core operands instead of three TF32 products each.
# Read kda_fused_chunkpar.cake's header first: the launches, the factored decays and the K slices are the same.
#
# What changes, and where each rounding comes from:
#   intra  — the same operations; its products are one TF32 product each (`via dot.tf32`), not three: every
#            value intra computes ends rounded to E before anything reads it (w and u are stored in E, the decayed
#            queries and P are staged in E, and A and Tm feed only w and u), so a product's 2^-11 sits under the
#            2^-9 (bf16) rounding that follows it. The WY terms w and u are E scratch (half the bytes).
#            The chunked control (experiments/kda/controls.py, chunk_step) rounds w and u exactly there.
#   recur  — per chunk, the state entering the chunk is rounded to E once (SE) and serves both products that
#            read it: vn = u - w SE on 16-bit operands (the control's `_stage(u - w @ s_in)`), vn rounded to E,
#            the output as before, and the state update S <- e^glast S + kl^T vn with kl fp32 and vn in E:
#            `via dot.tf32`, one TF32 product, exact in vn (a 16-bit value has at most TF32's 10 mantissa bits)
#            and 2^-11 relative in kl, a quarter of vn's own rounding. The state itself stays fp32 in registers.
# kda_fused_chunkpar keeps every term of the state path fp32 because rounding u to bf16 failed seed 1's STREAM case
# under the kda_forward table of session 4; the table was recalibrated since (session 5, the input-rounding term)
# on controls that include this rounding. The CPU interpreter computes TF32 products in fp32, so only the GPU's
# gates can judge the roundings above.
# E serves f16 and bf16 only: at fp32 inputs `via dot.tf32` would round fp32 values the fp32 table (calibrated on
# exact fp32 controls) does not allow; kda_fused_chunkpar serves fp32.
# Measured on the H200 (session 13; scripts/gpu/s13_kda.sh, s13_kda2.sh; raw results/h200-2026-12-03/s13-calls/kda,
# kda2), ms of kernels a call at h96_fixed [intra, recur]: chunkpar 5.744 [3.375, 2.367]; staged with intra's
# products at three TF32 4.517 [3.29, 1.56]; one TF32 product, intra at 4 warps capped at 128 registers 3.149;
# 2 warps, no cap 2.982 [1.760, 1.220] (BK 32: 3.197; cap 168: 3.496). Session 14 (scripts/gpu/s14_kda.sh, raw
# results/h200-2026-12-03/s14-calls/) swept both launches and composed each launch's fastest: **BK 64 and recur's loop
# at 2 stages, 2.582 [1.685, 0.895]**, the defaults (the params block says what else ranked behind). The defaults
# passed every kda_forward gate in bf16 under seeds 0, 1 and 2 and in fp16 under seeds 0 and 1 on the H200, and ran
# at 0.890x of fla chunk_kda over the six FlashKDA shapes (1.002x at h96_fixed; three processes, RESULTS.md).
schedule kda_fused_staged_kl16 implements kda_forward
target sm_90a

# The params are kda_fused_chunkpar's (its comments say what each does and what the H200 measured there); the
# defaults are chunkpar's but intra's warps, register cap and K slice and recur's stages (the header's
# measurements). recur at BV 64, no cap, 8 warps or a cap of 128 ranked behind BV 32 capped at 168 (session 13,
# kda/st_profile.log). Session 14 at h96_fixed, ms [intra, recur] from the defaults (s14-calls/pass2/sweep.log):
# intra BK 128 3.983 (spills 130 bytes), 4 warps 2.333, 1 warp 3.058, cap 168 1.777 against 1.685; recur 3 stages
# 1.350 (80 KB of buffers: two programs an SM), 8 warps 1.947, cap 128 0.942, BV 16 1.432, BV 64 1.924 against 0.895.
# Intra's loops at 2 stages cost 2.6x (pass1/sweep.log).

dtype E in {f16, bf16}
param C = 32 in {16, 32}
param BV = 32 in {16, 32, 64, 128}
param BK = 64 in {16, 32, 64, 128}
param WARPS_INTRA = 2 in {1, 2, 4, 8}
param REGS_INTRA = 255 in {128, 168, 255}
param STAGES_INTRA = 1 in {1, 2, 3}
param WARPS_RECUR = 4 in {1, 2, 4, 8}
param STAGES_RECUR = 2 in {1, 2, 3}
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
scratch ws: E[B, T, H, K] = 0
scratch us: E[B, T, H, V] = 0
scratch kls: E[B, T, H, K] = 0
scratch qds: E[B, T, H, K] = 0
scratch ps: E[B, T, H, C] = 0
scratch gls: f32[B, cdiv(T, C), H, K] = 0

launch intra {
  grid t in cdiv(T, C), h in H, b in B
  role main: warps WARPS_INTRA, regs REGS_INTRA {
    # K is walked in slices of BK: A and P accumulate over the slices and every per-channel term (the gate, gc,
    # the decayed keys and queries) lives one [C, BK] slice at a time. A product contracting all of K = 128
    # holds a replicated [C, K] operand per warp (fp32 and split in two for tf32x3): at BK = K intra filled the
    # 255 registers and spilled, which left one program of 8 warps per SM. Per-channel terms are independent
    # across channels (gc is a cumsum over rows), so slicing changes no value; only the row norms of q and k
    # need all of K, and they are reduced first.
    let row: i32[C] = arange(C)
    let live: bool[C] = t*C + row < T
    let rate: f32 = sum(exp(load A_log[h : +1] masked other 0), axis=0)
    let bl: f32[C] = cast(load beta[b, t*C : +C, h] masked other 0, f32)
    let bc: f32[C] = where(live, 1.0 / (1.0 + exp(-bl)), 0.0)
    let qr: f32[C, K] = cast(load q[b, t*C : +C, h, :] masked other 0, f32)
    let qn: f32[C] = rsqrt(sum(qr * qr, axis=1) + 1.0e-6)
    let kr: f32[C, K] = cast(load k[b, t*C : +C, h, :] masked other 0, f32)
    let kn: f32[C] = rsqrt(sum(kr * kr, axis=1) + 1.0e-6)
    let A: f32[C, C] = 0.0
    let P: f32[C, C] = 0.0
    for kk in 0 .. cdiv(K, BK) pipelined STAGES_INTRA as s {
      let bias: f32[BK] = load dt_bias[h, kk*BK : +BK] masked other 0
      let graw: f32[C, BK] = cast(load g[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32)
      # rows past T have gate 0, so gc is flat there and the last row is the whole chunk's decay
      let gc: f32[C, BK] = cumsum(where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0), axis=0)
      let glast: f32[BK] = sum(where(row[:, None] == C - 1, gc, 0.0), axis=0)
      let gr: f32[BK] = sum(where(row[:, None] == C // 2 - 1, gc, 0.0), axis=0)
      store exp(glast) -> gls[b, t, h, kk*BK : +BK] masked
      let kc: f32[C, BK] = cast(load k[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32) * kn[:, None]
      store cast(kc * exp(glast[None, :] - gc), E) -> kls[b, t*C : +C, h, kk*BK : +BK] masked
      let kdn: f32[C, BK] = kc * exp(gr[None, :] - gc)
      A = mma(kc * exp(gc - gr[None, :]), kdn.T, A) via dot.tf32
      let qc: f32[C, BK] = cast(load q[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32) * qn[:, None]
      store cast(qc * exp(gc), E) -> qds[b, t*C : +C, h, kk*BK : +BK] masked
      P = mma(qc * exp(gc - gr[None, :]), kdn.T, P) via dot.tf32
    }
    store cast(where(row[:, None] >= row[None, :], P, 0.0), E) -> ps[b, t*C : +C, h, :] masked
    A = where(row[:, None] > row[None, :], bc[:, None] * A, 0.0)
    # Tm = (I + A)^-1 by recursive doubling over diagonal blocks (all rows at once, not row by row): with Tm the
    # inverse of (I + A)'s diagonal blocks of `width`, the blocks of 2 width are [[D1, 0], [L, D2]], whose
    # inverse is Tm - Tm L Tm (L: A's entries below the diagonal blocks of `width` inside those of 2 width).
    # At width 1 Tm is I, so the first level is I - L exactly, without products: start there at width 2; the
    # doublings stop at width >= C: four at C = 32, three at C = 16 (3 + C // 32 of them: exactly log2(C) - 1 for
    # C in 16 .. 64, one more than needed at 8 and 128, where the extra level's L is zero; session 7 — C = 16 ran
    # a fourth level of two dependent tf32x3 products by a zero L). Each is exact algebra, as stable as block
    # forward substitution.
    let Tm: f32[C, C] = where(row[:, None] == row[None, :], 1.0, where((row[:, None] == row[None, :] + 1) & (row[:, None] % 2 == 1), -A, 0.0))
    let width: i32 = 2
    for level in 1 .. 4 + C // 32 {
      let pair: bool[C, C] = row[:, None] // (2 * width) == row[None, :] // (2 * width)
      let L: f32[C, C] = where(pair & (row[:, None] // width > row[None, :] // width), A, 0.0)
      Tm = Tm - mma(mma(Tm, L) via dot.tf32, Tm) via dot.tf32
      width = width * 2
    }
    # w = Tm (beta k e^gc), slice by slice: gc is recomputed from the same loads by the same expression (cheaper
    # than keeping [C, K] of it live across the solve)
    for kk in 0 .. cdiv(K, BK) pipelined STAGES_INTRA as s {
      let bias: f32[BK] = load dt_bias[h, kk*BK : +BK] masked other 0
      let graw: f32[C, BK] = cast(load g[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32)
      let gc: f32[C, BK] = cumsum(where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0), axis=0)
      let kc: f32[C, BK] = cast(load k[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32) * kn[:, None]
      store cast(mma(Tm, bc[:, None] * kc * exp(gc)) via dot.tf32, E) -> ws[b, t*C : +C, h, kk*BK : +BK] masked
    }
    let vc: f32[C, V] = cast(load v[b, t*C : +C, h, :] masked other 0, f32)
    store cast(mma(Tm, bc[:, None] * vc) via dot.tf32, E) -> us[b, t*C : +C, h, :] masked
  }
}

launch recur {
  grid vt in cdiv(V, BV), h in H, b in B
  role main: warps WARPS_RECUR, regs REGS_RECUR {
    let scale: f32 = rsqrt(cast(K, f32))
    # The state is held transposed, [BV, K], as in kda_fused_chunkpar: the V tile is the rows of both state products.
    let ST: f32[BV, K] = (load h0[b, h, :, vt*BV : +BV] masked other 0).T
    for t in 0 .. cdiv(T, C) pipelined STAGES_RECUR as s {
      let w: E[C, K] = load ws[b, t*C : +C, h, :] masked other 0
      let u: E[C, BV] = load us[b, t*C : +C, h, vt*BV : +BV] masked other 0
      # the state entering the chunk, rounded once for both products that read it
      let SE: E[BV, K] = cast(ST, E)
      let vnT: E[BV, C] = cast(cast(u.T, f32) - mma(SE, w.T) via dot, E)
      let qd: E[C, K] = load qds[b, t*C : +C, h, :] masked other 0
      let P: E[C, C] = load ps[b, t*C : +C, h, :] masked other 0
      let oc: f32[C, BV] = scale * (mma(qd, SE.T) via dot + mma(P, vnT.T) via dot)
      store cast(oc, E) -> o[b, t*C : +C, h, vt*BV : +BV] masked
      # rows past T read kl = 0: they add nothing to the state
      let kl: E[C, K] = load kls[b, t*C : +C, h, :] masked other 0
      let decay: f32[K] = load gls[b, t, h, :]
      ST = decay[None, :] * ST + mma(vnT, kl) via dot
    }
    store ST.T -> state[b, h, :, vt*BV : +BV] masked
  }
}
