# Chunk-parallel fused Kimi Delta Attention forward (kda_forward) at chunk 64: kda_fused_chunkpar.cake's two
# launches (intra: the chunk's WY terms, decayed keys and queries and causal attention P; recur: the serial state
# recurrence with each chunk's output; read that header for the launches, the scratch and the precision argument),
# with A's and P's intra-chunk decays factored per block of SUB rows so that C = 64 stays inside fp32's range.
# Why: recur walks T/C chunks one after another (256 dependent steps at T = 8192 and C = 32: recur was 2.37 of
# 5.74 ms at h96_fixed on the H200, session 7); fla's chunk_kda walks 128 at C = 64. chunkpar cannot take C = 64:
# it factors e^(gc_i - gc_j) about the chunk's middle row, each factor's exponent up to 5 C/2 (the gate is >= -5),
# which passes fp32's exp limit (~88.7) above C = 32.
# The factoring (fla's sub-chunk idea, written for this IR): the rows of block sb = i // SUB share a reference row
# r = SUB sb + SUB/2 - 1 (the block's middle), and for i in block sb
#     A_ij = beta_i sum_k (k_ik e^(gc_ik - gc_rk)) (k_jk e^(gc_rk - gc_jk)),   P likewise with q_i in the row factor.
# Exponent bound (gc is a cumsum of gates in [-5, 0]: it falls by at most 5 a row and never rises): the row factor's
# exponent gc_i - gc_r is <= 0 for i >= r and <= 5 (SUB/2 - 1) for i < r; the column factor's gc_r - gc_j is <= 0
# for every j <= r (all earlier blocks included) and <= 5 SUB/2 for j in the block after r. So no factor's exponent
# passes 5 SUB/2: 40 at SUB = 16, 80 at SUB = 32 (< 88.7, as chunkpar's bound at C = 32), whatever C is. Rows of
# other blocks and columns past the block's end, whose exponents are unbounded (to 5 (C - 1) = 315), have them
# replaced by -inf before exp: exact zero operands, so no inf is formed there. The product of the two factors in a
# kept entry (j <= i) is e^(gc_i - gc_j) <= 1; above the diagonal inside a block it is at most e^(5 (SUB - 1)):
# e^75 at SUB = 16, finite even summed over K = 128 terms (e^80 < fp32's max), so at SUB = 16 no inf or NaN is
# formed anywhere; at SUB = 32 such an entry may overflow (e^155) to inf or NaN exactly as chunkpar's do. Either
# way `where` keeps only j <= i (P) and j < i (A): the discarded entries never reach a kept one (each product
# entry is its own sum over K). A product's entries are independent sums, so the block-rows add into A and P
# without changing a kept value's operations: each kept entry is one sum over K of the same factor products.
# C = 32 with SUB = 32 is chunkpar's factoring exactly (one block, r = C/2 - 1, every mask true: the same exponents,
# products and sums; tests/kda/test_kda_chunk64.py checks the outputs bit for bit under the interpreter).
# Precision: unchanged from chunkpar, and its argument holds as written there: everything that feeds the state (Tm,
# beta k e^gc, beta v, w, u, kl, vn, S) is fp32 from the inputs to `state` (ws, us, kls fp32 scratch), every fp32
# product is `via dot.tf32x3`, only the output's operands (qd, P, S and vn in recur's output) are rounded to E.
# The only numerical difference at C = 64 is where gc comes from: a cumsum over 64 rows instead of 32, so its
# magnitude (and its fp32 rounding, about 2^-24 |gc|) reaches 320 instead of 160; fla's gc runs over 64 rows too.
# Tm = (I + A)^-1 at 64 rows is chunkpar's blockwise doubling unchanged: its 3 + C // 32 levels are five at C = 64
# (widths 2 .. 32), exactly log2(C) - 1.
# What it costs (tensor-core products, multiply-adds per token per head, each tf32x3 product three of them):
#   A and P: C/SUB products of [C, BK] x [BK, C] per K slice where chunkpar does one, (C/SUB) C K each per token:
#            256 K at C = 64, SUB = 16 and 128 K at SUB = 32, against chunkpar's 32 K (8x and 4x; only about
#            (C/SUB + 1)/(2 C/SUB) of the blocks are lower-triangular, the rest are zero operands the IR cannot skip);
#   Tm:      five levels of two [64, 64] x [64, 64] products, 640 per token against 256 (2.5x);
#   w, u:    C K per token, twice chunkpar's; exps: 2 C/SUB + 3 of [C, BK] per slice against 5.
#   recur:   half the serial steps, each with products of twice the rows (C = 64 in vn = u - w S, o and the state
#            update), w, kl [64, K] fp32 loads per step, and the same state traffic per step;
#   memory:  ps ([B, T, H, C] in E) doubles: 101 MB written and read at h96_fixed in bf16 instead of 50; gls halves.
# Whether the halved serial chain beats the extra intra work only the H200 can say (scripts/gpu/s9_kda64.sh).
schedule kda_fused_chunk64 implements kda_forward
target sm_90a

dtype E in {f32, f16, bf16}
# C = 32 is in the domain for comparison with chunkpar (C = 32, SUB = 32 computes chunkpar's values)
param C = 64 in {32, 64}
# the rows that share one reference row in A's and P's factoring (header): exponents up to 5 SUB/2 <= 80
param SUB = 16 in {16, 32}
# recur's V tile; BV = 32 as chunkpar (two programs an SM at 4 warps: see chunkpar's header)
param BV = 32 in {16, 32, 64, 128}
# intra's slice of K (chunkpar's: A's and P's sums over K accumulated one slice at a time)
param BK = 16 in {16, 32, 64, 128}
# Warps, register caps (Triton's maxnreg) and loop stages of both launches: code placement only, no operation or
# rounding changes with them. chunkpar's header has what the H200 measured for them at C = 32. At C = 64 the
# defaults come from the sm_90a compile on a CPU (scripts/aot_kda_sass.py, Triton 3.9, K = V = 128 in bf16;
# instructions one warp issues per program, intra with trips 8,4,5,8 (SUB 16) or 8,2,5,8 (SUB 32), recur per chunk;
# the H200's Triton 3.6 allocates differently, scripts/gpu/s9_kda64.sh ranks them there):
#   intra  chunkpar (C 32, 4 warps, 128 registers: four programs an SM)  16,162 (505 a token), 353 spill instr.
#          C 64, SUB 16, 4 warps, 128                                     46,222, 4,463 spill instructions
#          C 64, SUB 16, 4 warps, no cap (two programs an SM)             40,343 (630 a token), no spills
#          C 64, SUB 32, 4 warps, no cap                                  30,766 (481 a token), no spills
#          C 64, SUB 16, 8 warps, no cap (one program an SM)              30,439 a warp, 139 spill instructions
#   recur  chunkpar (C 32, 4 warps, 168: three programs an SM)            1,573 a chunk, 93 spill instructions
#          C 64, 4 warps, 168                                             3,336, 659 spill instructions
#          C 64, 4 warps, no cap (two programs an SM)                     2,470, 74
#          C 64, 8 warps, 128 (two programs an SM)                        1,620, 247
#          C 64, 8 warps, no cap (one program an SM)                      1,284, 11
#          C 64, BV 16, 4 warps, 168 (three programs an SM, 768 at h96)   1,946, 142
# At C = 64 Triton makes intra's [64, *] products warpgroup MMAs (wgmma, M = 64: fewer tensor-core instructions
# than chunkpar's m16n8k8 ones, 840 against 1,056 a program at SUB 16) and the capped variants spill heavily, so
# both launches default to no cap at 4 warps: two programs an SM. recur then runs h96_fixed's 384 programs
# (BV = 32) in 1.45 waves on 132 SMs (chunkpar: one wave at three an SM) and h64_fixed's 256 in one.
# Measured on the H200 (session 9, scripts/gpu/s9_call3.sh -> s9_kda64.sh, gpu_kda_profile.py at h96_fixed, ms of
# kernels a call, intra + recur): {} 6.786 + 2.911 = 9.70; SUB 32: 5.226 + 2.924 = 8.15 (the best); SUB 32 with
# REGS_INTRA 168: 5.781 + 2.911; SUB 32 with recur at 8 warps, 128 registers: 5.222 + 4.184. chunkpar's defaults
# (session 8): 3.378 + 2.371 = 5.75. Slower in both launches: Triton 3.6 on the H200 gives both 255 registers with
# spills (intra 24, recur 64), so recur's half as many serial chunks do not pay for 1.45 waves and the larger chunk.
# No gate verdict on the H200 yet (the bf16 gates were cut at 95 s); the CPU interpreter passes every gate.
param WARPS_INTRA = 4 in {1, 2, 4, 8}
param REGS_INTRA = 255 in {128, 168, 255}
param STAGES_INTRA = 1 in {1, 2, 3}
param WARPS_RECUR = 4 in {1, 2, 4, 8}
param STAGES_RECUR = 1 in {1, 2, 3}
param REGS_RECUR = 255 in {128, 168, 255}
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
      store exp(glast) -> gls[b, t, h, kk*BK : +BK] masked
      let kc: f32[C, BK] = cast(load k[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32) * kn[:, None]
      store kc * exp(glast[None, :] - gc) -> kls[b, t*C : +C, h, kk*BK : +BK] masked
      let qc: f32[C, BK] = cast(load q[b, t*C : +C, h, kk*BK : +BK] masked other 0, f32) * qn[:, None]
      store cast(qc * exp(gc), E) -> qds[b, t*C : +C, h, kk*BK : +BK] masked
      # A's and P's block-rows of SUB rows, each factored about its own reference row r = SUB sb + SUB/2 - 1
      # (header): the rows of block sb times the columns up to the block's end. Rows of other blocks and columns
      # past the block are zero operands (they add exact zeros): their exponents, which could pass fp32's range,
      # are replaced by -inf before `exp` (e^-inf = 0), so no inf is ever formed there.
      for sb in 0 .. C // SUB {
        let gr: f32[BK] = sum(where(row[:, None] == sb*SUB + SUB // 2 - 1, gc, 0.0), axis=0)
        let mine: bool[C, 1] = row[:, None] // SUB == sb
        let decayed: f32[C, BK] = exp(where(mine, gc - gr[None, :], -inf))
        let kdn: f32[C, BK] = kc * exp(where(row[:, None] // SUB <= sb, gr[None, :] - gc, -inf))
        A = mma(kc * decayed, kdn.T, A) via dot.tf32x3
        P = mma(qc * decayed, kdn.T, P) via dot.tf32x3
      }
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
