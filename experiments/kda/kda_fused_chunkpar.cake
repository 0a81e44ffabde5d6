# Chunk-parallel fused Kimi Delta Attention forward (kda_forward: FlashKDA's benchmark semantics), in the
# structure of fla's chunk_kda with its output folded into the recurrence: two launches that communicate through
# scratch buffers.
#   intra  — parallel over (chunk, head, batch): the fused preprocessing (q, k L2-normalized with eps 1e-6,
#            beta = sigmoid(logits), safe gate g = -5 sigmoid(exp(A_log[h]) (g_raw + dt_bias[h]))), the
#            cumulative log-decays gc of the chunk, the strictly lower A = beta (k e^gc)(k e^-gc)^T,
#            Tm = (I + A)^-1 by blockwise doubling, and everything recur reads: the WY terms
#            w = Tm (beta k e^gc) and u = Tm (beta v), the keys decayed to the chunk's end kl = k e^(glast - gc)
#            with the chunk's decay e^glast, the decayed queries qd = q e^gc and the causal intra-chunk
#            attention P = (q e^gc)(k e^-gc)^T;
#   recur  — parallel over (V tile, head, batch), serial over chunks only for the [K, BV] state (held
#            transposed, [BV, K]): per chunk the corrected values vn = u - w S, the chunk's output
#            o = K^-1/2 (qd S + P vn) from the state entering it, then S <- e^glast S + kl^T vn.
# Session 6 folded the former third launch (output, parallel over (V tile, chunk, head, batch)) into recur: it
# read the state entering every chunk from a bf16 snapshot (805 MB written by recur and read back at h96_fixed,
# plus its zero fill) and vn from a copy; recur holds both in registers when the chunk's output needs them.
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
# about as coarsely as the bf16 staging that failed. Only the output's operands are rounded to the input dtype,
# as fla rounds them: qd and P (staged in E), and the state entering each chunk and vn (cast to E in registers),
# which o's final rounding to the input dtype dominates; their products are plain `via dot` on 16-bit operands.
# Session 6's changes keep every rounding above: the first doubling level of Tm is I - L, exact, where it was
# two tf32x3 products by the identity (fewer roundings, not more); intra's K slices change only the order in
# which A's and P's fp32 sums over K are accumulated (each slice a tf32x3 product into the fp32 accumulator), and
# w's slices recompute gc by the same expression from the same loads; transposing the state changes no value.
# Session 7 adds intra's register cap and loop stages (below): code placement only, every operation and rounding
# as above (BK = 16 reorders A's and P's sums over K as BK = 32 did).
# BV = 32 by default (session 6, without a GPU): recur's grid is V/BV x H x B programs walking all T/C chunks
# serially, so its time is about (waves of programs) x (chunks) x (one chunk's latency). At 255 registers and
# 4 warps an SM holds two recur programs: BV = 16 made 768 programs at h96_fixed, three waves on 132 SMs; BV = 32
# makes 384, two waves, and halves the L2 reads of w, kl, qd and P that the V tiles share. BV = 32 spills
# 8 bytes (BV = 16: 0, BV = 64: 368; Triton 3.9 for sm_90a). The H200 has not ranked BV yet
# (scripts/gpu/s6_kda6.sh profiles 16, 32, 64 and 128).
schedule kda_fused_chunkpar implements kda_forward
target sm_90a

dtype E in {f32, f16, bf16}
param C = 32 in {16, 32}
param BV = 32 in {16, 32, 64, 128}
# intra's slice of K (see the launch); BK = K is the unsliced form. 16 since session 7 (below).
param BK = 16 in {16, 32, 64, 128}
# 4 warps (session 6, without a GPU): at 255 registers a thread, 8 warps fill an SM's register file with one intra
# program, whose chain of small dependent products (Tm's doublings) then stalls the SM at every layout change;
# 4 warps let two programs share an SM (and Triton spreads a [32, 32] product over 4 warps with half the
# replication of 8). It spills 40 bytes (8 warps: 0; Triton 3.9 for sm_90a); s6_kda6.sh profiles both.
param WARPS_INTRA = 4 in {1, 2, 4, 8}
# Session 7 (kdaintra7, without a GPU): intra is latency-bound at two programs an SM (255 registers x 128
# threads, about 53 us a program on the H200); these two params are the levers its SASS shows (sm_90a, Triton
# 3.6, scripts/aot_kda_sass.py; the table is in scripts/gpu/s7_kdaintra7.sh, which ranks them). Defaults: as
# measured. Neither changes a value: a register cap and the loops' num_stages change no operation.
# Measured on the H200 (session 7 call 1, scripts/gpu_kda_profile.py at h96_fixed, ms of kernels per call, intra
# in brackets; raw results/h200-2026-12-02/s7-call1/kdaintra7_profile.json): {} (BK 32, 3 stages, no cap) 8.356;
# STAGES_INTRA 1: 7.713; + REGS_INTRA 168: 7.026; BK 16 + 1 stage + 168: 6.921; **BK 16 + 1 stage + 128: 6.836
# (intra 3.388, was 4.95)**, the defaults now; C 16 + 1 stage + 168: 8.905 (intra 3.062, recur 5.840: twice the
# serial chunks). ptxas on the H200: 128 registers spill 26 bytes, 168 spill 6 (BK 16).
# REGS_INTRA caps intra's registers (Triton's maxnreg): 168 fits three programs an SM, 128 four, at the price of
# spills to local memory. 255 is no cap. With one stage and BK = 16 intra needs 190 registers unbounded and
# spills 24 bytes at 168 (BK = 32: 160 bytes, 267 spill instructions a program).
param REGS_INTRA = 128 in {128, 168, 255}
# STAGES_INTRA is the num_stages of intra's two K-slice loops (Triton's default, 3, before session 7): over four
# slices the cp.async staging of three buffers costs index arithmetic, shared-memory traffic and barriers; at 1
# each slice is loaded in place: 14,987 instructions a warp per program instead of 22,156, 107 block barriers
# instead of 143, no spills (the loads' latency is exposed instead: only the H200 can weigh the two).
param STAGES_INTRA = 1 in {1, 2, 3}
param WARPS_RECUR = 4 in {1, 2, 4, 8}
# recur's chunk loop is software-pipelined over this many buffers of its loads (Triton's num_stages)
param STAGES_RECUR = 1 in {1, 2, 3}
# REGS_RECUR caps recur's registers (Triton's maxnreg), as REGS_INTRA does intra's. recur is the serial part: its
# time is about (waves of programs) x (chunks) x (one chunk's latency). At 255 registers and 4 warps two programs
# share an SM, so h96_fixed's 384 programs (BV = 32) take two waves on 132 SMs, the second 45% full; 168 registers
# fit three programs an SM (396 slots: one wave), 128 four, at the price of spills inside the serial loop. A cap
# changes no operation or rounding. Measured on the H200 (session 7 call 3, scripts/gpu_kda_profile.py at
# h96_fixed, ms of kernels per call, recur in brackets; raw results/h200-2026-12-02/s7-call3/kda7_recur.json):
# 255 (no cap) 6.74 [3.40]; **168: 5.738 [2.367]**, ptxas spills 58 bytes; 128: 7.702 [4.332], 194 bytes; BV 64
# uncapped 6.606 [3.230]. 168 passed every kda_forward gate in bf16 under seeds 0 and 1 there (call 4).
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
# fp32: they feed the state recurrence (see the header)
scratch ws: f32[B, T, H, K] = 0
scratch us: f32[B, T, H, V] = 0
scratch kls: f32[B, T, H, K] = 0
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
      store kc * exp(glast[None, :] - gc) -> kls[b, t*C : +C, h, kk*BK : +BK] masked
      let kdn: f32[C, BK] = kc * exp(gr[None, :] - gc)
      A = mma(kc * exp(gc - gr[None, :]), kdn.T, A) via dot.tf32x3
      let qc: f32[C, BK] = cast(load q[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32) * qn[:, None]
      store cast(qc * exp(gc), E) -> qds[b, t*C : +C, h, kk*BK : +BK] masked
      P = mma(qc * exp(gc - gr[None, :]), kdn.T, P) via dot.tf32x3
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
      Tm = Tm - mma(mma(Tm, L) via dot.tf32x3, Tm) via dot.tf32x3
      width = width * 2
    }
    # w = Tm (beta k e^gc), slice by slice: gc is recomputed from the same loads by the same expression (cheaper
    # than keeping [C, K] of it live across the solve)
    for kk in 0 .. cdiv(K, BK) pipelined STAGES_INTRA as s {
      let bias: f32[BK] = load dt_bias[h, kk*BK : +BK] masked other 0
      let graw: f32[C, BK] = cast(load g[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32)
      let gc: f32[C, BK] = cumsum(where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0), axis=0)
      let kc: f32[C, BK] = cast(load k[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32) * kn[:, None]
      store mma(Tm, bc[:, None] * kc * exp(gc)) via dot.tf32x3 -> ws[b, t*C : +C, h, kk*BK : +BK] masked
    }
    let vc: f32[C, V] = cast(load v[b, t*C : +C, h, :] masked other 0, f32)
    store mma(Tm, bc[:, None] * vc) via dot.tf32x3 -> us[b, t*C : +C, h, :] masked
  }
}

launch recur {
  grid vt in cdiv(V, BV), h in H, b in B
  role main: warps WARPS_RECUR, regs REGS_RECUR {
    let scale: f32 = rsqrt(cast(K, f32))
    # The state is held transposed, [BV, K], so both fp32 products of the loop have the V tile as their rows:
    # at BV = 64 a warpgroup's tensor-core product (M = 64) can take its operands from shared memory, where a
    # product with the chunk's 32 rows as M holds a replicated [16, K] operand per warp in registers (fp32,
    # split in two for tf32x3: recur sat at 252 registers for BV = 16).
    let ST: f32[BV, K] = (load h0[b, h, :, vt*BV : +BV] masked other 0).T
    for t in 0 .. cdiv(T, C) pipelined STAGES_RECUR as s {
      let w: f32[C, K] = load ws[b, t*C : +C, h, :] masked other 0
      let u: f32[C, BV] = load us[b, t*C : +C, h, vt*BV : +BV] masked other 0
      let vnT: f32[BV, C] = u.T - mma(ST, w.T) via dot.tf32x3
      # The chunk's output, here rather than in a launch of its own: o = K^-1/2 (qd S_prev + P vn) reads the
      # state entering the chunk and vn where they are in registers, so neither goes through global memory (the
      # per-chunk state snapshots alone were 805 MB written and read again at h96_fixed). The operands are
      # rounded to E exactly as that output launch read them (qd, P staged in E; S and vn cast to E) and the
      # products are plain 16-bit `via dot`: o's own rounding to E dominates them. Nothing here feeds S.
      let qd: E[C, K] = load qds[b, t*C : +C, h, :] masked other 0
      let P: E[C, C] = load ps[b, t*C : +C, h, :] masked other 0
      let oc: f32[C, BV] = scale * (mma(qd, cast(ST, E).T) via dot + mma(P, cast(vnT, E).T) via dot)
      store cast(oc, E) -> o[b, t*C : +C, h, vt*BV : +BV] masked
      # rows past T read kl = 0: they add nothing to the state
      let kl: f32[C, K] = load kls[b, t*C : +C, h, :] masked other 0
      let decay: f32[K] = load gls[b, t, h, :]
      ST = decay[None, :] * ST + mma(vnT, kl) via dot.tf32x3
    }
    store ST.T -> state[b, h, :, vt*BV : +BV] masked
  }
}
