# Varlen-native fused Kimi Delta Attention forward (kda_forward): kda_fused_staged.cake's two launches, each one grid
# over every sequence of the batch instead of one launch pair a sequence from the host. Read kda_fused_staged.cake's
# and kda_fused_chunkpar.cake's headers first: every operation, rounding and product form is theirs; only where
# a chunk's tokens are and which sequence's state a program walks change.
#
# The batch is one row of tokens (B = 1: a dense batch of B sequences is that row's B spans, the wrapper's view) cut
# into sequences by two tables the wrapper (experiments/kda/adapt.py) builds on the host from cu_seqlens:
#   chunk_table[NC, 2] — per chunk of C tokens of every sequence: its first token and its sequence's end (eos);
#   seq_table[S, 3]    — per sequence: its first token (bos), its end (eos) and the index of its first chunk.
#   intra  — grid (chunk, head): as the staged intra over one chunk; rows past their sequence's end are dead.
#   recur  — grid (V tile, head, sequence): walks its sequence's cdiv(eos - bos, C) chunks from that sequence's h0
#            (zero chunks: the state stored is h0, an empty sequence's final state).
# A dead row (past its sequence's end) is addressed as row T, one past the tokens: its loads are masked (0) and its
# store to o dropped by the bounds test a gathered index carries, so the last chunk of one sequence never writes
# the first rows of the next (the tokens are gathered by row: `rows`, a tile of indices). What intra hands recur
# lives in slots of C rows a chunk, which intra writes whole (its dead rows hold 0, as the staged schedule's masked
# loads read them), so the scratch needs no fill (cake.ir.overwrite proves it) and recur reads slot rows, not tokens.
# Not measured on a GPU yet (scripts/gpu/s14_varlen.sh is ready).
schedule kda_fused_varlen_kl16 implements kda_forward
target sm_90a

# The params and their defaults are kda_fused_staged's (its comments say what the H200 measured).
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
dims B, T, H, NC, S, static K, static V

tensor q: in E[B, T, H, K]
tensor k: in E[B, T, H, K]
tensor v: in E[B, T, H, V]
tensor g: in E[B, T, H, K]
tensor beta: in E[B, T, H]
tensor A_log: in f32[H]
tensor dt_bias: in f32[H, K]
tensor h0: in f32[S, H, K, V]
tensor o: out E[B, T, H, V]
tensor state: out f32[S, H, K, V]
# the sequences (see the header); i32, built by the wrapper
tensor chunk_table: in i32[NC, 2]
tensor seq_table: in i32[S, 3]
# what intra hands recur, in slots of C rows, one a chunk (chunk c's at rows c*C : +C): each slot is written
# whole by its chunk's program (dead rows as 0), so no fill is needed, and a sequence's last chunk never
# reaches the next sequence's rows.
scratch ws: E[NC * C, H, K] = 0
scratch us: E[NC * C, H, V] = 0
scratch kls: E[NC * C, H, K] = 0
scratch qds: E[NC * C, H, K] = 0
scratch ps: E[NC * C, H, C] = 0
scratch gls: f32[NC, H, K] = 0

launch intra {
  grid c in NC, h in H
  role main: warps WARPS_INTRA, regs REGS_INTRA {
    # K is walked in slices of BK: A and P accumulate over the slices and every per-channel term (the gate, gc,
    # the decayed keys and queries) lives one [C, BK] slice at a time. A product contracting all of K = 128
    # holds a replicated [C, K] operand per warp (fp32 and split in two for tf32x3): at BK = K intra filled the
    # 255 registers and spilled, which left one program of 8 warps per SM. Per-channel terms are independent
    # across channels (gc is a cumsum over rows), so slicing changes no value; only the row norms of q and k
    # need all of K, and they are reduced first.
    let row: i32[C] = arange(C)
    let start: i32 = load chunk_table[c, 0]
    let eos: i32 = load chunk_table[c, 1]
    let live: bool[C] = start + row < eos
    # a dead row is row T: masked by the bounds test of the gathered index
    let rows: i32[C] = where(live, start + row, T)
    let rate: f32 = sum(exp(load A_log[h : +1] masked other 0), axis=0)
    let bl: f32[C] = cast(load beta[0, rows, h] masked other 0, f32)
    let bc: f32[C] = where(live, 1.0 / (1.0 + exp(-bl)), 0.0)
    let qr: f32[C, K] = cast(load q[0, rows, h, :] masked other 0, f32)
    let qn: f32[C] = rsqrt(sum(qr * qr, axis=1) + 1.0e-6)
    let kr: f32[C, K] = cast(load k[0, rows, h, :] masked other 0, f32)
    let kn: f32[C] = rsqrt(sum(kr * kr, axis=1) + 1.0e-6)
    let A: f32[C, C] = 0.0
    let P: f32[C, C] = 0.0
    for kk in 0 .. cdiv(K, BK) pipelined STAGES_INTRA as s {
      let bias: f32[BK] = load dt_bias[h, kk*BK : +BK] masked other 0
      let graw: f32[C, BK] = cast(load g[0, rows, h, kk*BK : +BK] masked other 0, f32)
      # dead rows have gate 0, so gc is flat there and the last row is the whole chunk's decay
      let gc: f32[C, BK] = cumsum(where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0), axis=0)
      let glast: f32[BK] = sum(where(row[:, None] == C - 1, gc, 0.0), axis=0)
      let gr: f32[BK] = sum(where(row[:, None] == C // 2 - 1, gc, 0.0), axis=0)
      store exp(glast) -> gls[c, h, kk*BK : +BK] masked
      let kc: f32[C, BK] = cast(load k[0, rows, h, kk*BK : +BK] masked other 0, f32) * kn[:, None]
      store cast(kc * exp(glast[None, :] - gc), E) -> kls[c*C : +C, h, kk*BK : +BK] masked
      let kdn: f32[C, BK] = kc * exp(gr[None, :] - gc)
      A = mma(kc * exp(gc - gr[None, :]), kdn.T, A) via dot.tf32
      let qc: f32[C, BK] = cast(load q[0, rows, h, kk*BK : +BK] masked other 0, f32) * qn[:, None]
      store cast(qc * exp(gc), E) -> qds[c*C : +C, h, kk*BK : +BK] masked
      P = mma(qc * exp(gc - gr[None, :]), kdn.T, P) via dot.tf32
    }
    store cast(where(row[:, None] >= row[None, :], P, 0.0), E) -> ps[c*C : +C, h, :] masked
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
      let graw: f32[C, BK] = cast(load g[0, rows, h, kk*BK : +BK] masked other 0, f32)
      let gc: f32[C, BK] = cumsum(where(live[:, None], -5.0 / (1.0 + exp(-rate * (graw + bias[None, :]))), 0.0), axis=0)
      let kc: f32[C, BK] = cast(load k[0, rows, h, kk*BK : +BK] masked other 0, f32) * kn[:, None]
      store cast(mma(Tm, bc[:, None] * kc * exp(gc)) via dot.tf32, E) -> ws[c*C : +C, h, kk*BK : +BK] masked
    }
    let vc: f32[C, V] = cast(load v[0, rows, h, :] masked other 0, f32)
    store cast(mma(Tm, bc[:, None] * vc) via dot.tf32, E) -> us[c*C : +C, h, :] masked
  }
}

launch recur {
  grid vt in cdiv(V, BV), h in H, s in S
  role main: warps WARPS_RECUR, regs REGS_RECUR {
    let scale: f32 = rsqrt(cast(K, f32))
    # The state is held transposed, [BV, K], as in kda_fused_chunkpar: the V tile is the rows of both state products.
    let bos: i32 = load seq_table[s, 0]
    let eos: i32 = load seq_table[s, 1]
    let first: i32 = load seq_table[s, 2]
    let ST: f32[BV, K] = (load h0[s, h, :, vt*BV : +BV] masked other 0).T
    for t in 0 .. cdiv(eos - bos, C) pipelined STAGES_RECUR as stage {
      # this chunk's slot in the scratch, and its tokens in o (a dead row is row T: its store is dropped)
      let slot: i32 = (first + t) * C
      let rows: i32[C] = where(bos + t*C + arange(C) < eos, bos + t*C + arange(C), T)
      let w: E[C, K] = load ws[slot : +C, h, :] masked other 0
      let u: E[C, BV] = load us[slot : +C, h, vt*BV : +BV] masked other 0
      # the state entering the chunk, rounded once for both products that read it
      let SE: E[BV, K] = cast(ST, E)
      let vnT: E[BV, C] = cast(cast(u.T, f32) - mma(SE, w.T) via dot, E)
      let qd: E[C, K] = load qds[slot : +C, h, :] masked other 0
      let P: E[C, C] = load ps[slot : +C, h, :] masked other 0
      let oc: f32[C, BV] = scale * (mma(qd, SE.T) via dot + mma(P, vnT.T) via dot)
      store cast(oc, E) -> o[0, rows, h, vt*BV : +BV] masked
      # dead rows hold kl = 0 (intra wrote them from zero loads): they add nothing to the state
      let kl: E[C, K] = load kls[slot : +C, h, :] masked other 0
      let decay: f32[K] = load gls[first + t, h, :]
      ST = decay[None, :] * ST + mma(vnT, kl) via dot
    }
    store ST.T -> state[s, h, :, vt*BV : +BV] masked
  }
}
