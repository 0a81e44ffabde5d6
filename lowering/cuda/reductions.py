"""Reductions and scans of tiles during CUDA codegen: `sum`/`min`/`max`/`argmin`/`argmax` along an axis and
`cumsum`, the part of `exprs.ExprGen` that turns a reduction into code (a mixin it inherits).

| source                         | lowering                                                                 |
|--------------------------------|--------------------------------------------------------------------------|
| an mma result (axis 1)         | `frag_reduce`: a per-thread scan of the fragment, then across the quad (and warps) |
| a sum along rows of one 16-bit shared tile (`one_row_per_lane`), whole warps' worth of rows | `row_per_lane_sum`: a row a lane, 16-byte loads, no shuffles |
| a tile no mma lays out, a sum of whole warps' worth of outputs | `warp_transposed_sum`: 32 lines a warp, a 31-shuffle butterfly |
| any other such tile            | `coop_reduce`: a warp per output, lanes across the reduced axis          |
| `cumsum`                       | `scan`: a warp per line, a shuffle scan 32 elements at a time            |

Results of the last two land in a shared-memory row the whole role reads.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from cake.ir.nodes import Call, DType, Expr
from cake.ir.running_reduction import RunningReduction
from cake.lowering.cuda import rules
from cake.lowering.cuda.cnames import CTYPE, float_literal
from cake.lowering.cuda.context import LaunchCtx
from cake.lowering.cuda.errors import Code, Unlowerable
from cake.lowering.cuda.layouts import (
    LANES_PER_VECTOR_WAVEFRONT,
    FragLayout,
    MmaFragLayout,
    row_chunk_problem,
)
from cake.lowering.cuda.plan import RoleSlot
from cake.lowering.cuda.values import (
    Elem,
    Fam,
    Lazy,
    Map,
    Scalar,
    SmemTile,
    SmemVec,
    Value,
    Vec,
    replace_leaf,
)
from cake.lowering.cuda.writer import Writer

from cake.arch import SMEM_BANKS, SMEM_VECTOR_BYTES, THREADS_PER_WARP

FULL_MASK = "0xffffffffu"
# Chunks a lane of `row_per_lane_sum` has in flight (the chunk loop's unroll: 4 x 4 registers of loads). Enough to
# cover shared-memory latency with a warpgroup reading; the whole row at once (16 chunks at D = 128) needs 64
# registers of loads and spilled 100 B in assign_pingpong_prodnorm's producer at its 56 registers (ptxas, nvcc 13).
ROW_PER_LANE_CHUNKS_IN_FLIGHT = 4


def butterfly_steps(lanes: int) -> tuple[int, ...]:
    """The exchange distances of `warp_transposed_sum`'s butterfly, halving: 16, 8, 4, 2, 1 for a warp of 32."""
    return tuple(lanes >> k for k in range(1, lanes.bit_length()) if lanes >> k)


def one_row_per_lane(src: Value, axis: int, n_red: int) -> SmemTile | str:
    """Whether a sum of whole warps' worth of outputs can be `row_per_lane_sum`: returns the shared tile it reads,
    or why not (the sum is then warp-transposed; a lowering decision, named in the generated comment).

    The case: a sum along rows (axis 1) of an elementwise expression whose only tile operand is one
    non-transposed stage of a 16-bit shared buffer (any number of references to it, plus scalars), laid out so that
    a lane can read its row 16 bytes at a time without bank conflicts (`layouts.row_chunk_problem`)."""
    if axis != 1:
        return "the sum runs down columns (axis 0), not along rows"
    tiles = {leaf for leaf in src.leaves() if not isinstance(leaf, Scalar)}
    if len(tiles) != 1:
        return f"the summed expression reads {len(tiles)} tiles or vectors, not one shared tile"
    (tile,) = tiles
    if not isinstance(tile, SmemTile):
        return "the summed tile is not in shared memory"
    if tile.transposed:
        return "the shared tile is read transposed"
    if tile.dtype.bytes != 2:
        return f"the shared tile holds {tile.dtype.value}, not a 16-bit type"
    if tile.shape != src.shape:
        return f"the shared tile {list(tile.shape)} is broadcast to {list(src.shape)}"
    if tile.layout is None:
        return "the shared tile has no known layout"
    problem = row_chunk_problem(tile.layout, tile.shape[0], n_red)
    return tile if problem is None else problem


class ReductionGen:
    """The reductions of one role instance's expressions; `exprs.ExprGen` supplies the state and `value`."""

    lc: LaunchCtx
    slot: RoleSlot
    w: Writer
    inst: str
    loop_depth: int
    scope: dict[str, Value]
    red_cache: dict[tuple[int, int, str], tuple[Value, Vec, Vec]]
    # lowering the per-iteration reduction of a deferred running reduction (`defer`): a min/max and its position
    # stay each thread's partial (no merge across the row's threads here)
    partial_reduction: bool = False

    def value(self, expr: Expr, hint: str | None = None) -> Value:
        raise NotImplementedError  # exprs.ExprGen

    def frag_loop(self, layout: FragLayout) -> AbstractContextManager[Elem]:
        raise NotImplementedError  # exprs.ExprGen: a loop over the fragment's registers, yielding each element

    def reduce(self, expr: Call, rule: rules.ReduceRule, hint: str | None) -> Value:
        axis_kw = next((k.value for k in expr.kwargs if k.name == "axis"), None)
        src = self.value(expr.args[0])
        if axis_kw is None:
            raise Unlowerable(Code.UNSUPPORTED, f"`{rule.name}` over a whole tile needs a block-wide reduction; "
                              "give axis=")
        axis = self.lc.int_of(axis_kw)
        if axis < 0:
            axis += src.rank
        if src.rank != 2:
            raise Unlowerable(Code.UNSUPPORTED, f"`{rule.name}` of a rank-{src.rank} tile along an axis")
        layout = src.frag_layout()
        if layout is not None:
            if axis != 1:
                raise Unlowerable(Code.LAYOUT, f"`{rule.name}` along axis 0 of an mma result crosses warps; "
                                  "reduce along axis 1 (rows)")
            return self.frag_reduce(src, rule, layout, hint)
        return self.coop_reduce(src, rule, axis, hint)

    def frag_reduce(self, src: Value, rule: rules.ReduceRule, layout: FragLayout, hint: str | None) -> Value:
        partial = bool(rule.better) and self.partial_reduction
        # a partial (per-thread) min and a merged one of the same tile are different values: cached apart
        key = (id(src), 1, (rule.better or "sum") + (" partial" if partial else ""))
        if rule.better and key in self.red_cache:
            _, val, arg = self.red_cache[key]
            return arg if rule.index else val
        c = layout.cname
        stem = hint or self.w.fresh("red")
        vname, iname = f"{stem}_v", f"{stem}_i"
        out = DType.F32 if src.dtype.is_float else src.dtype
        self.w.comment(f"{rule.name} along rows: a per-thread scan of the fragment, then across the quad"
                       if layout.quad else f"{rule.name} along rows: each thread holds whole rows")
        self.w.line(f"{CTYPE[out]} {vname}[{c}::kRows];")
        if rule.better:
            self.w.line(f"int {iname}[{c}::kRows];")
        self.w.line("#pragma unroll")
        init = f"{vname}[cake_q] = {rule.identity(out)};" + (f" {iname}[cake_q] = 0;" if rule.better else "")
        self.w.line(f"for (int cake_q = 0; cake_q < {c}::kRows; ++cake_q) {{ {init} }}")
        scanned, guard = self.column_guard(src, rule, out, layout)
        if guard is not None:
            self.w.comment("the `where` masks whole columns: test each column once, skip masked ones (they would "
                           "contribute the reduction's identity)")
            self.w.line(f"bool cake_ok[{c}::kCols];")
            self.w.line("#pragma unroll")
            self.w.line(f"for (int cake_p = 0; cake_p < {c}::kCols; ++cake_p) cake_ok[cake_p] = {guard};")
        with self.frag_loop(layout) as e:
            v = rules.convert(scanned.at(e), scanned.dtype, out)
            skip = "cake_ok[cake_p] && " if guard is not None else ""
            if rule.better:
                self.w.line(f"const {CTYPE[out]} cake_v = {v};")
                self.w.line(f"if ({skip}cake_v {rule.better} {vname}[cake_q]) {{ {vname}[cake_q] = cake_v; "
                            f"{iname}[cake_q] = cake_p; }}")
            else:
                self.w.line(f"if (cake_ok[cake_p]) {vname}[cake_q] += {v};" if guard else f"{vname}[cake_q] += {v};")
        if partial:
            self.w.comment("each thread's partial: its running reduction merges the row's threads after the loop "
                           "(`defer`)")
        if rule.better:
            merge = "cake_argmin_merge" if rule.better == "<" else "cake_argmax_merge"
            self.w.line("#pragma unroll")
            with self.w.block(f"for (int cake_q = 0; cake_q < {c}::kRows; ++cake_q)"):
                self.w.line(f"{iname}[cake_q] = {c}::col({iname}[cake_q], cake_wq, cake_lane);")
                if layout.quad and not partial:
                    with self.w.block("for (int cake_o = 1; cake_o < 4; cake_o <<= 1)"):
                        self.w.line(f"const {CTYPE[out]} cake_ov = __shfl_xor_sync({FULL_MASK}, {vname}[cake_q], cake_o);")
                        self.w.line(f"const int cake_oi = __shfl_xor_sync({FULL_MASK}, {iname}[cake_q], cake_o);")
                        self.w.line(f"{merge}({vname}[cake_q], {iname}[cake_q], cake_ov, cake_oi);")
        elif layout.quad:
            self.w.line("#pragma unroll")
            with self.w.block(f"for (int cake_q = 0; cake_q < {c}::kRows; ++cake_q)"):
                self.w.line(f"{vname}[cake_q] += __shfl_xor_sync({FULL_MASK}, {vname}[cake_q], 1);")
                self.w.line(f"{vname}[cake_q] += __shfl_xor_sync({FULL_MASK}, {vname}[cake_q], 2);")
        n = src.shape[0]
        if isinstance(layout, MmaFragLayout) and layout.warps_n > 1 and not partial:
            self.cross_warp_merge(rule, layout, vname, iname, out, n)
        val = Vec(out, (n,), vname, Fam.ROW, layout, layout.nrows)
        arg = Vec(DType.I32, (n,), iname, Fam.ROW, layout, layout.nrows)
        if rule.better:
            self.red_cache[key] = (src, val, arg)
        return arg if rule.index else val

    def merge_partials(self, found: RunningReduction) -> None:
        """After the loop of a deferred running reduction: merge each thread's partial minimum (and its position)
        across the threads that share a row, as the per-iteration reduction would have (ties to the first
        position). Nothing to merge where a thread holds whole rows."""
        value = self.scope.get(found.value)
        index = self.scope.get(found.index) if found.index is not None else None
        if not isinstance(value, Vec) or value.layout is None or (index is not None and not isinstance(index, Vec)):
            raise Unlowerable(Code.LAYOUT, f"`defer {self.slot.name} {found.value}`: the running value is not held "
                              "in the rows of an mma result")
        layout = value.layout
        split = isinstance(layout, MmaFragLayout) and layout.warps_n > 1
        if not layout.quad and not split:
            return
        c, out = layout.cname, value.dtype
        rule = rules.REDUCTIONS["argmin" if found.better == "<" else "argmax"]
        merge = "cake_argmin_merge" if found.better == "<" else "cake_argmax_merge"
        iname = index.name if isinstance(index, Vec) else f"{value.name}_pos"
        self.w.comment(f"deferred: `{found.value}` held each thread's partial through the loop; merged once here")
        if index is None:
            self.w.line(f"int {iname}[{c}::kRows] = {{}};  // positions only break ties here")
        if layout.quad:
            self.w.line("#pragma unroll")
            with self.w.block(f"for (int cake_q = 0; cake_q < {c}::kRows; ++cake_q)"):
                with self.w.block("for (int cake_o = 1; cake_o < 4; cake_o <<= 1)"):
                    self.w.line(f"const {CTYPE[out]} cake_ov = __shfl_xor_sync({FULL_MASK}, {value.name}[cake_q], cake_o);")
                    self.w.line(f"const int cake_oi = __shfl_xor_sync({FULL_MASK}, {iname}[cake_q], cake_o);")
                    self.w.line(f"{merge}({value.name}[cake_q], {iname}[cake_q], cake_ov, cake_oi);")
        if split:
            assert isinstance(layout, MmaFragLayout)
            self.cross_warp_merge(rule, layout, value.name, iname, out, value.shape[0])

    def cross_warp_merge(self, rule: rules.ReduceRule, layout: MmaFragLayout, vname: str, iname: str, out: DType,
                         rows: int) -> None:
        """Warps that split an mma tile's columns each hold partial row results: exchange them through shared
        memory and merge in column order (so ties still resolve to the first index)."""
        parts = layout.warps_n
        vbytes = parts * rows * 4
        offset = self.lc.smem.alloc(f"{self.slot.name}:{vname} partials", 2 * vbytes * self.slot.replicas, 16)
        c, wn = layout.cname, f"(cake_wq % {parts})"
        self.w.comment(f"{parts} warps share each row: merge their partial results through shared memory")
        if self.loop_depth:
            self.role_sync()  # type: ignore[attr-defined]
        pv = f"{vname}_parts"
        pi = f"{iname}_parts"
        self.w.line(f"{CTYPE[out]}* {pv} = reinterpret_cast<{CTYPE[out]}*>(smem + {offset} + {self.inst} * {2 * vbytes});")
        self.w.line(f"int* {pi} = reinterpret_cast<int*>(smem + {offset} + {self.inst} * {2 * vbytes} + {vbytes});")
        with self.w.block("if (cake_lane % 4 == 0)"):
            self.w.line("#pragma unroll")
            with self.w.block(f"for (int cake_q = 0; cake_q < {c}::kRows; ++cake_q)"):
                self.w.line(f"const int cake_row = {c}::row(cake_q, cake_wq, cake_lane);")
                self.w.line(f"{pv}[{wn} * {rows} + cake_row] = {vname}[cake_q];")
                if rule.better:
                    self.w.line(f"{pi}[{wn} * {rows} + cake_row] = {iname}[cake_q];")
        self.role_sync()  # type: ignore[attr-defined]
        merge = "cake_argmin_merge" if rule.better == "<" else "cake_argmax_merge"
        self.w.line("#pragma unroll")
        with self.w.block(f"for (int cake_q = 0; cake_q < {c}::kRows; ++cake_q)"):
            self.w.line(f"const int cake_row = {c}::row(cake_q, cake_wq, cake_lane);")
            self.w.line(f"{vname}[cake_q] = {pv}[cake_row];")
            if rule.better:
                self.w.line(f"{iname}[cake_q] = {pi}[cake_row];")
            with self.w.block(f"for (int cake_j = 1; cake_j < {parts}; ++cake_j)"):
                if rule.better:
                    self.w.line(f"{merge}({vname}[cake_q], {iname}[cake_q], {pv}[cake_j * {rows} + cake_row], "
                                f"{pi}[cake_j * {rows} + cake_row]);")
                else:
                    self.w.line(f"{vname}[cake_q] += {pv}[cake_j * {rows} + cake_row];")

    def column_guard(self, src: Value, rule: rules.ReduceRule, out: DType, layout: FragLayout
                     ) -> tuple[Value, str | None]:
        """`where(cond, x, identity)` reduced along rows, with `cond` a function of the column alone, is the
        reduction of x over the columns where cond holds: an identity element never changes a running
        min / max / sum (nor its index). Returns (x, cond per column slot) or (src, None)."""
        if not (isinstance(src, Map) and src.op == "where" and len(src.args) == 3):
            return src, None
        cond, value, other = src.args
        if not isinstance(other, Scalar) or other.c != rule.identity(out) or value.dtype != out:
            return src, None
        c = layout.cname
        probe = Elem(("CAKE_ROW_PROBE", f"{c}::col(cake_p, cake_wq, cake_lane)"), (Fam.ROW, Fam.COL),
                     ("CAKE_ROW_PROBE", "cake_p"), "CAKE_REG_PROBE")
        try:
            text = cond.at(probe.adapt(cond.rank))
        except Unlowerable:
            return src, None
        if "PROBE" in text:
            return src, None  # the condition depends on the row or the register: not a column mask
        return value, text

    def coop_reduce(self, src: Value, rule: rules.ReduceRule, axis: int, hint: str | None) -> Value:
        """A reduction of a tile no mma lays out, into a shared-memory row the whole role then reads. A sum of
        whole warps' worth of outputs takes `warp_transposed_sum`; anything else one warp per output element,
        lanes across the reduced axis."""
        rows, cols = src.shape
        n_out, n_red = (rows, cols) if axis == 1 else (cols, rows)
        out = DType.I32 if rule.index else (DType.F32 if src.dtype.is_float else src.dtype)
        stem = hint or self.w.fresh("red")
        offset = self.lc.smem.alloc(f"{self.slot.name}:{stem}", n_out * 4 * self.slot.replicas)
        ptr = f"reinterpret_cast<{CTYPE[out]}*>(smem + {offset} + {self.inst} * {n_out * 4})"
        warps = self.slot.warps
        if not rule.better and n_out % THREADS_PER_WARP == 0:
            fit = one_row_per_lane(src, axis, n_red)
            if isinstance(fit, SmemTile):
                return self.row_per_lane_sum(src, fit, n_out, n_red, out, stem, ptr)
            return self.warp_transposed_sum(src, axis, n_out, n_red, out, stem, ptr, why_not_row_per_lane=fit)
        self.w.comment(f"{rule.name}(axis={axis}) of a [{rows}, {cols}] tile: one warp per output, lanes across "
                       f"the reduced axis, into shared memory")
        if self.loop_depth:
            self.role_sync()  # type: ignore[attr-defined]
        self.w.line(f"{CTYPE[out]}* {stem}_s = {ptr};")
        acc_t = CTYPE[DType.F32 if src.dtype.is_float else src.dtype]
        with self.w.block(f"for (int cake_o = cake_rwarp; cake_o < {n_out}; cake_o += {warps})"):
            ident_v = rule.identity(DType.F32 if src.dtype.is_float else src.dtype)
            self.w.line(f"{acc_t} cake_a = {ident_v};" + (" int cake_ai = 0;" if rule.better else ""))
            with self.w.block(f"for (int cake_j = cake_lane; cake_j < {n_red}; cake_j += {THREADS_PER_WARP})"):
                e = Elem.generic("cake_o", "cake_j") if axis == 1 else Elem.generic("cake_j", "cake_o")
                v = rules.convert(src.at(e), src.dtype, DType.F32 if src.dtype.is_float else src.dtype)
                if rule.better:
                    self.w.line(f"const {acc_t} cake_v = {v};")
                    self.w.line(f"if (cake_v {rule.better} cake_a) {{ cake_a = cake_v; cake_ai = cake_j; }}")
                else:
                    self.w.line(f"cake_a += {v};")
            with self.w.block("for (int cake_s = 16; cake_s > 0; cake_s >>= 1)"):
                if rule.better:
                    merge = "cake_argmin_merge" if rule.better == "<" else "cake_argmax_merge"
                    self.w.line(f"const {acc_t} cake_ov = __shfl_xor_sync({FULL_MASK}, cake_a, cake_s);")
                    self.w.line(f"const int cake_oi = __shfl_xor_sync({FULL_MASK}, cake_ai, cake_s);")
                    self.w.line(f"{merge}(cake_a, cake_ai, cake_ov, cake_oi);")
                else:
                    self.w.line(f"cake_a += __shfl_xor_sync({FULL_MASK}, cake_a, cake_s);")
            result = "cake_ai" if rule.index else "cake_a"
            self.w.line(f"if (cake_lane == 0) {stem}_s[cake_o] = {result};")
        self.role_sync()  # type: ignore[attr-defined]
        return SmemVec(out, (n_out,), f"{stem}_s")

    def row_per_lane_sum(self, src: Value, tile: SmemTile, n_out: int, n_red: int, out: DType, stem: str,
                         ptr: str) -> Value:
        """A sum along rows of an expression of one 16-bit shared tile (`one_row_per_lane`): lane l of a warp owns
        row o0 + l and walks it in 16-byte chunks, one `ld.shared.v4` each at the chunk's offset in the layout
        (`offset_fn(row, 8 * chunk)`: a 128B swizzle moves whole 16-byte units, so the chunk's 8 elements stay
        contiguous and in order; `layouts.row_chunk_problem` checked that on every element). The 8 halves are
        unpacked into registers of the tile's own type and the same expression tree is evaluated on them (the
        tile leaf replaced, so a `cast` converts exactly as the element-wise form would). Bank math: with the
        128B swizzle chunk j of row r sits in the 16-byte bank group (j % 8) ^ (r % 8), so every 8 lanes cover
        the 32 banks once and a warp's 32 requests take the minimum 4 wavefronts (the layout check proves this
        for the actual layout). Per lane D/8 loads where the warp-transposed form does D 2-byte loads and a
        31-shuffle butterfly. Accumulation is in f32 and deterministic: 8 partial sums, one per position in a
        chunk, each over the chunks in order, then added pairwise in a fixed tree."""
        lanes = THREADS_PER_WARP
        acc_t = CTYPE[out]
        per_chunk = SMEM_VECTOR_BYTES // tile.dtype.bytes
        chunks = n_red // per_chunk
        zero = rules.REDUCTIONS["sum"].identity(out)
        self.w.comment(f"sum(axis=1) into {n_out} outputs: one row per lane, {chunks} 16-byte chunks a row "
                       f"(ld.shared.v4 at the chunk's offset in `{tile.buffer}`'s layout, its {per_chunk} elements "
                       "contiguous), no shuffles")
        self.w.comment(f"every {LANES_PER_VECTOR_WAVEFRONT} lanes' chunks cover the {SMEM_BANKS} banks once (checked "
                       f"on the layout): {lanes // LANES_PER_VECTOR_WAVEFRONT} wavefronts a load; {per_chunk} partial "
                       "sums, one per position in a chunk, added pairwise")
        if self.loop_depth:
            self.role_sync()  # type: ignore[attr-defined]
        self.w.line(f"{acc_t}* {stem}_s = {ptr};")
        in_registers = Lazy(tile.dtype, tile.shape, lambda idx: "cake_h[cake_i]", what="a chunk in registers")
        expr = replace_leaf(src, tile, in_registers)
        step = self.slot.warps * lanes
        with self.w.block(f"for (int cake_o0 = cake_rwarp * {lanes}; cake_o0 < {n_out}; cake_o0 += {step})"):
            self.w.line("const int cake_row = cake_o0 + cake_lane;")
            self.w.line(f"{acc_t} cake_p[{per_chunk}];")
            self.w.line("#pragma unroll")
            self.w.line(f"for (int cake_i = 0; cake_i < {per_chunk}; ++cake_i) cake_p[cake_i] = {zero};")
            self.w.line(f"#pragma unroll {min(ROW_PER_LANE_CHUNKS_IN_FLIGHT, chunks)}")
            with self.w.block(f"for (int cake_j = 0; cake_j < {chunks}; ++cake_j)"):
                self.w.line(f"{CTYPE[tile.dtype]} cake_h[{per_chunk}];")
                self.w.line(f"cake_unpack8(cake_lds_v4({tile.base} + {tile.offset_fn}(cake_row, cake_j * "
                            f"{per_chunk})), cake_h);")
                self.w.line("#pragma unroll")
                with self.w.block(f"for (int cake_i = 0; cake_i < {per_chunk}; ++cake_i)"):
                    e = Elem.generic("cake_row", f"(cake_j * {per_chunk} + cake_i)")
                    self.w.line(f"cake_p[cake_i] += {rules.convert(expr.at(e), expr.dtype, out)};")
            self.w.line("#pragma unroll")
            with self.w.block(f"for (int cake_d = 1; cake_d < {per_chunk}; cake_d <<= 1)"):
                self.w.line("#pragma unroll")
                self.w.line(f"for (int cake_i = 0; cake_i < {per_chunk}; cake_i += 2 * cake_d) "
                            "cake_p[cake_i] += cake_p[cake_i + cake_d];")
            self.w.line(f"{stem}_s[cake_row] = cake_p[0];")
        self.role_sync()  # type: ignore[attr-defined]
        return SmemVec(out, (n_out,), f"{stem}_s")

    def warp_transposed_sum(self, src: Value, axis: int, n_out: int, n_red: int, out: DType, stem: str,
                            ptr: str, why_not_row_per_lane: str) -> Value:
        """A sum along an axis, 32 outputs per warp at a time: lane l adds elements l, l + 32, ... of each of the
        32 lines (coalesced reads, 32 independent accumulators), then a transposing butterfly leaves line l's
        total in lane l — at each step s = 16, 8, .., 1 a lane keeps the half of its partial sums that its bit s
        selects and adds its partner's (lane ^ s) copy of that half: 31 shuffles for 32 outputs, where one warp
        per output spends five dependent shuffles on each (session 8: `assign_pingpong_fused`'s ||c||^2 at a
        warp per centroid made the kernel 3x slower than the wgmma it sat beside). The sum over a line runs in
        a fixed order (lane-strided, then the butterfly's), so it is deterministic."""
        lanes = THREADS_PER_WARP
        acc_t = CTYPE[out]
        zero = rules.REDUCTIONS["sum"].identity(out)
        self.w.comment(f"sum(axis={axis}) into {n_out} outputs: {lanes} lines a warp, lanes across each line, then "
                       "a transposing butterfly (lane l ends with line l's total)")
        self.w.comment(f"not one row per lane: {why_not_row_per_lane}")
        if self.loop_depth:
            self.role_sync()  # type: ignore[attr-defined]
        self.w.line(f"{acc_t}* {stem}_s = {ptr};")
        step = self.slot.warps * lanes
        with self.w.block(f"for (int cake_o0 = cake_rwarp * {lanes}; cake_o0 < {n_out}; cake_o0 += {step})"):
            self.w.line(f"{acc_t} cake_v[{lanes}];")
            self.w.line("#pragma unroll")
            self.w.line(f"for (int cake_r = 0; cake_r < {lanes}; ++cake_r) cake_v[cake_r] = {zero};")
            with self.w.block(f"for (int cake_j = cake_lane; cake_j < {n_red}; cake_j += {lanes})"):
                self.w.line("#pragma unroll")
                with self.w.block(f"for (int cake_r = 0; cake_r < {lanes}; ++cake_r)"):
                    e = Elem.generic("(cake_o0 + cake_r)", "cake_j") if axis == 1 else \
                        Elem.generic("cake_j", "(cake_o0 + cake_r)")
                    self.w.line(f"cake_v[cake_r] += {rules.convert(src.at(e), src.dtype, out)};")
            for half in butterfly_steps(lanes):  # literal steps: every index is a constant, cake_v stays in registers
                with self.w.block(f"/* butterfly step {half} */"):
                    self.w.line(f"const bool cake_hi = (cake_lane & {half}) != 0;")
                    self.w.line("#pragma unroll")
                    with self.w.block(f"for (int cake_i = 0; cake_i < {half}; ++cake_i)"):
                        self.w.line(f"const {acc_t} cake_keep = cake_hi ? cake_v[cake_i + {half}] : cake_v[cake_i];")
                        self.w.line(f"const {acc_t} cake_send = cake_hi ? cake_v[cake_i] : cake_v[cake_i + {half}];")
                        self.w.line(f"cake_v[cake_i] = cake_keep + __shfl_xor_sync({FULL_MASK}, cake_send, {half});")
            self.w.line(f"{stem}_s[cake_o0 + cake_lane] = cake_v[0];")
        self.role_sync()  # type: ignore[attr-defined]
        return SmemVec(out, (n_out,), f"{stem}_s")

    def scan(self, expr: Call, hint: str | None) -> Value:
        """An inclusive prefix sum along an axis of a tile no mma lays out: one warp per line, 32 elements at
        a time (a shuffle scan, then the running carry from lane 31), into shared memory the role then reads.
        Sequential in the line's order, so deterministic; floats accumulate in f32."""
        src = self.value(expr.args[0])
        if src.has_frag() or src.frag_layout() is not None:
            raise Unlowerable(Code.LAYOUT, "`cumsum` of an mma result or of a vector laid out by one; scan a "
                              "loaded or shared-memory tile")
        if src.rank not in (1, 2):
            raise Unlowerable(Code.UNSUPPORTED, f"`cumsum` of a rank-{src.rank} tile")
        axis = self.lc.int_of(next(k.value for k in expr.kwargs if k.name == "axis")) % src.rank
        shape = src.shape
        lines, n_scan = (1, shape[0]) if src.rank == 1 else ((shape[0], shape[1]) if axis == 1 else
                                                             (shape[1], shape[0]))
        out = DType.F32 if src.dtype.is_float else src.dtype
        stem = hint or self.w.fresh("scan")
        size = max(4, out.bytes) * lines * n_scan
        offset = self.lc.smem.alloc(f"{self.slot.name}:{stem}", size * self.slot.replicas, 16)
        self.w.comment(f"cumsum(axis={axis}) of a {list(shape)} tile: one warp per line, a shuffle scan per "
                       "32 elements plus the carry, into shared memory")
        if self.loop_depth:
            self.role_sync()  # type: ignore[attr-defined]
        ct = CTYPE[out]
        self.w.line(f"{ct}* {stem}_s = reinterpret_cast<{ct}*>(smem + {offset} + {self.inst} * {size});")
        if src.rank == 1:
            elem, slot = Elem.generic("cake_j"), "cake_j"
        elif axis == 1:
            elem, slot = Elem.generic("cake_o", "cake_j"), f"cake_o * {n_scan} + cake_j"
        else:
            elem, slot = Elem.generic("cake_j", "cake_o"), f"cake_j * {lines} + cake_o"
        zero = float_literal(0.0) if out.is_float else "0"
        with self.w.block(f"for (int cake_o = cake_rwarp; cake_o < {lines}; cake_o += {self.slot.warps})"):
            self.w.line(f"{ct} cake_carry = {zero};")
            with self.w.block(f"for (int cake_j0 = 0; cake_j0 < {n_scan}; cake_j0 += 32)"):
                self.w.line("const int cake_j = cake_j0 + cake_lane;")
                v = rules.convert(src.at(elem), src.dtype, out)
                self.w.line(f"{ct} cake_a = cake_j < {n_scan} ? {v} : {zero};")
                with self.w.block("for (int cake_s = 1; cake_s < 32; cake_s <<= 1)"):
                    self.w.line(f"const {ct} cake_up = __shfl_up_sync({FULL_MASK}, cake_a, cake_s);")
                    self.w.line("if (cake_lane >= cake_s) cake_a += cake_up;")
                self.w.line("cake_a += cake_carry;")
                self.w.line(f"if (cake_j < {n_scan}) {stem}_s[{slot}] = cake_a;")
                self.w.line(f"cake_carry = __shfl_sync({FULL_MASK}, cake_a, 31);")
        self.role_sync()  # type: ignore[attr-defined]
        if src.rank == 1:
            return SmemVec(out, shape, f"{stem}_s")
        cols = shape[1]
        return Lazy(out, shape, lambda idx: f"{stem}_s[({idx[0]}) * {cols} + ({idx[1]})]", smem=True,
                    what="cumsum")
