"""Per-target dialects: the base class is the sm_80 lowering; subclasses hold only what differs.

| dialect | mma | copies into shared memory | barrier waits |
|---------|-----|---------------------------|---------------|
| Sm80    | mma.sync m16n8k16 from ldmatrix fragments (`dot`, `mma_sync.m16n8k16`) | cp.async, loads | test_wait spin |
| Sm90a   | + wgmma.m64nNk16 from swizzled shared memory, one warpgroup | + TMA (bulk tensor, mbarrier tx) | try_wait |
| Sm100a  | + tcgen05.mma into tensor memory (`mma ... -> tmem`), TMEM loads | + TMA | try_wait, tcgen05 fences |

Past 600 lines because each target is one class whose methods override the one below it (layouts, mma, held
operands, TMA); the next piece to move out is Sm90a's wgmma emission (`wgmma`, `hold_a`) with its layout, if it grows.
"""

from __future__ import annotations

from cake.ir import analysis as an
from cake.ir.dot_forms import is_dot
from cake.ir.nodes import Copy, DType, Expr, Index, Let, Load, Mma, MmaAsync, Name, NewAxis, Slice, Transpose
from cake.ir.stage_reads import read_only_as_wgmma_a
from cake.lowering.cuda.cnames import ident
from cake.lowering.cuda.errors import CheckerGap, Code, Unlowerable
from cake.lowering.cuda.layouts import MMA_K_STEP, FragLayout, MmaFragLayout, RowPerThreadLayout, round_up
from cake.lowering.cuda.mma_wrappers import UnknownForm, lookup, wrapper
from cake.lowering.cuda.values import Frag, HeldA, SmemTile, SmemVec, Value
from cake.lowering.cuda.writer import Writer

from cake.arch import (
    THREADS_PER_WARP,
    ArchSpec,
    Feature,
    MmaFamily,
    MmaForm,
    mma_forms_of,
    mma_sync_warp_grid,
)

# wgmma / tcgen05 descriptor swizzle codes per swizzle width (bytes).
WGMMA_SWIZZLE = {128: 1, 64: 2, 32: 3}
UMMA_SWIZZLE = {128: 2, 64: 4, 32: 6}
K_STEP_BYTES = 32  # one k16 step of 2-byte elements
TMEM_LOAD_TAIL_COLUMNS = 16  # tcgen05.ld 32x32b.x16 reads the last 16 columns of an odd-multiple-of-16 row
WGMMA_ROWS = mma_forms_of(MmaFamily.WGMMA)[0].m  # rows of one wgmma instruction (every wgmma form is m64)
A_FRAG_REG_BUDGET = 64  # registers a thread may spend holding a loop-invariant mma.sync A operand


# `via dot` on this backend: the warp-level form every target has.
DOT_FAMILY = MmaFamily.MMA_SYNC


def parse_form(arch: ArchSpec, form: str) -> MmaForm:
    """The target's row for an mma form (`dot`: its warp-level form). The checker refuses a form the target
    lacks (E0501, E0503) before codegen runs; here that is a C0101 for direct callers of `generate`."""
    if is_dot(form):  # the precision suffix is moot here: this form takes 16-bit operands only (E0611)
        row = next((f for f in arch.mma_forms if f.family is DOT_FAMILY), None)
        if row is None:
            raise Unlowerable(Code.MMA_FORM, f"{arch.name} has no {DOT_FAMILY.value} form for `via dot`")
        return row
    row = arch.mma_form(form)
    if row is None:
        known = ", ".join(sorted({f"{f.family.value}.m{f.m}nNk{f.k}" for f in arch.mma_forms}))
        raise Unlowerable(Code.MMA_FORM, f"{arch.name} has no mma form `{form}`", help=f"forms: {known}")
    return row


def mma_wrapper(gen, form: MmaForm, dtype: DType, a_registers: bool = False) -> str:  # type: ignore[no-untyped-def]
    """The generated wrapper of `form` on `dtype` operands (recorded for the program), by name."""
    try:
        lookup(gen.lc.arch, form.name, dtype.value)
    except UnknownForm as error:
        raise Unlowerable(Code.MMA_FORM, str(error), help="cast the operands to f16 or bf16") from None
    made = wrapper(form, dtype.value, a_registers)
    gen.lc.mma_wrappers.setdefault(made.name, made)
    return made.name


def ldmatrix_fragments(w: Writer, frags: str, ksteps: int, blocks: int, tile: SmemTile, block_row: str) -> None:
    """`uint32_t frags[ksteps][blocks][4]`: the A fragments (mma.sync m16n8k16 layout) of 16-row blocks of `tile`,
    one ldmatrix.x4 each; `block_row` is the C expression of a block's first row (over `cake_mb`)."""
    w.line(f"uint32_t {frags}[{ksteps}][{blocks}][4];")
    w.line("#pragma unroll")
    with w.block(f"for (int cake_kk = 0; cake_kk < {ksteps}; ++cake_kk)"):
        w.line("#pragma unroll")
        w.line(f"for (int cake_mb = 0; cake_mb < {blocks}; ++cake_mb) cake_ldmatrix_x4({frags}[cake_kk][cake_mb], "
               f"{tile.base} + {tile.offset_fn}({block_row} + cake_lane % 16, cake_kk * 16 + (cake_lane / 16) * 8));")


def padded_k(a: SmemTile, b: SmemTile, kdim: int) -> int:
    """The K extent an mma loops over: whole k16 steps. A K that is not a multiple of 16 (a small static D)
    reads the operands' zero-filled padding columns, which every copy into such a tile writes."""
    kpad = round_up(kdim, MMA_K_STEP)
    if kpad == kdim:
        return kdim
    a_cols = a.layout.cols if a.layout is not None and not a.transposed else 0
    b_cols = b.layout.cols if b.layout is not None and b.transposed else 0
    if a_cols < kpad or b_cols < kpad:
        raise Unlowerable(Code.MMA_FORM, f"an mma over K = {kdim} needs both operands padded with zeros to "
                          f"{kpad} columns (K-major)")
    return kpad


class Sm80:
    """Ampere: warp-level mma.sync, cp.async, mbarrier test_wait."""

    name = "sm_80"
    helpers: tuple[str, ...] = ("cake_common.cuh", "cake_sm80.cuh", "cake_mbarrier.cuh", "cake_warpgroup.cuh")

    def __init__(self, arch: ArchSpec, uses_tmem: bool = False):
        self.arch = arch
        self.uses_tmem = uses_tmem

    # ----------------------------------------------------------------------------------- layouts

    def operand_shape(self, gen, expr: Expr) -> tuple[int, ...]:  # type: ignore[no-untyped-def]
        if isinstance(expr, Transpose):
            return tuple(reversed(self.operand_shape(gen, expr.operand)))
        name = an.ref_name(expr) if isinstance(expr, (Index, Name)) else None
        decl = gen.lc.smem_decl(name) if name else None
        if decl is not None:
            return tuple(gen.lc.int_of(e) for e in decl.type.shape)
        for site in an.walk_body(gen.slot.role.body):
            st = site.stmt
            if isinstance(st, Let) and st.name == name:
                if st.type is not None:
                    return tuple(gen.lc.int_of(e) for e in st.type.shape)
                if isinstance(st.value, Load) and isinstance(st.value.source, Index):
                    return gen.tile_shape(st.value.source)
        raise Unlowerable(Code.MMA_FORM, "cannot tell the shape of an mma operand")

    def anchor_layout(self, gen, node: Mma | Load) -> FragLayout:  # type: ignore[no-untyped-def]
        if isinstance(node, Load):
            return self.tmem_layout(gen, node)
        form = parse_form(self.arch, node.form)
        rows = self.operand_shape(gen, node.a)[0]
        cols = self.operand_shape(gen, node.b)[1]
        cname = f"Frag_{gen.lc.launch.name}_{self.let_name(gen, node)}"
        if form.family is MmaFamily.MMA_SYNC:
            warps = gen.slot.warps
            # Every warp takes whole 16-row blocks; when the tile is too short for that, warps also split
            # the columns (then no row reduction can stay inside one warp). The checker's E0614 reads the same rule.
            grid = mma_sync_warp_grid(rows, cols, warps)
            if grid is None:
                raise Unlowerable(Code.MMA_FORM, f"mma_sync cannot split a {rows} x {cols} tile over {warps} warps "
                                  "in 16 x 16 blocks", help="make rows a multiple of 16 x warps")
            wm, wn = grid
            warp_rows, warp_cols = rows // wm, cols // wn
            layout: FragLayout = MmaFragLayout(
                cname, warp_rows // 16, warp_cols // 8, 16, warp_rows,
                f"mma.sync m16n8k16, {wm} x {wn} warps of {warp_rows} x {warp_cols}", wn, warp_cols)
        elif form.family is MmaFamily.WGMMA:
            layout = self.wgmma_layout(gen, cname, rows, cols, form)
        else:
            raise Unlowerable(Code.MMA_FORM, f"`{node.form}` is issued with the `mma a, b.T -> tmem` statement")
        gen.lc.layouts.setdefault(cname, layout)
        return gen.lc.layouts[cname]

    def wgmma_layout(self, gen, cname: str, rows: int, cols: int, form: MmaForm) -> FragLayout:  # type: ignore[no-untyped-def]
        raise Unlowerable(Code.MMA_FORM, f"wgmma needs sm_90a (target is {self.name})")

    def tmem_layout(self, gen, node: Load) -> FragLayout:  # type: ignore[no-untyped-def]
        raise Unlowerable(Code.UNSUPPORTED, f"tensor memory needs sm_100a (target is {self.name})")

    @staticmethod
    def let_name(gen, node: object) -> str:  # type: ignore[no-untyped-def]
        for site in an.walk_body(gen.slot.role.body):
            st = site.stmt
            if isinstance(st, Let) and st.value is node:
                return st.name
        return "acc"

    # ---------------------------------------------------------------------------------------- mma

    def mma(self, gen, node: Mma, a: SmemTile, b: SmemTile, acc: Frag | None, dst: str) -> Frag:  # type: ignore[no-untyped-def]
        form = parse_form(self.arch, node.form)
        if form.family is MmaFamily.MMA_SYNC:
            return self.mma_sync(gen, node, a, b, acc, dst, form)
        if form.family is MmaFamily.WGMMA:
            return self.wgmma(gen, node, a, b, acc, dst, form)
        raise Unlowerable(Code.MMA_FORM, f"`{node.form}` is issued with the `mma a, b.T -> tmem` statement")

    def _dst(self, gen, layout: FragLayout, acc: Frag | None, dst: str, shape: tuple[int, ...],  # type: ignore[no-untyped-def]
             zero: bool) -> Frag:
        if acc is not None and acc.name == dst:
            return acc
        gen.w.line(f"float {dst}[{layout.cname}::kRegs];")
        frag = Frag(DType.F32, shape, dst, layout)
        if acc is not None:
            gen.w.line(f"for (int cake_r = 0; cake_r < {layout.cname}::kRegs; ++cake_r) {dst}[cake_r] = {acc.name}[cake_r];")
        elif zero:
            gen.w.line(f"for (int cake_r = 0; cake_r < {layout.cname}::kRegs; ++cake_r) {dst}[cake_r] = 0.0f;")
        return frag

    def hold_a(self, gen, name: str, tile: SmemTile) -> Value:  # type: ignore[no-untyped-def]
        """What `let name = <shared stage>` binds: here the stage itself (mma.sync reads through ldmatrix at each
        product; `preload_a` keeps a staged loop-invariant A in registers on its own)."""
        return tile

    def preload_a(self, gen, name: str, tile: SmemTile) -> None:  # type: ignore[no-untyped-def]
        """A staged tile that is the A operand of an mma_sync inside a loop stays in registers as ldmatrix
        fragments for the whole loop (when they fit A_FRAG_REG_BUDGET registers)."""
        layout = gen.anchor
        if not isinstance(layout, MmaFragLayout) or layout.mb_stride != 16:
            return
        uses = [site for site in an.walk_body(gen.slot.role.body) if isinstance(site.stmt, Let)
                and isinstance(site.stmt.value, Mma) and isinstance(site.stmt.value.a, Name)
                and site.stmt.value.a.id == name
                and parse_form(self.arch, site.stmt.value.form).family is MmaFamily.MMA_SYNC]
        if not uses or not uses[0].loops:
            return
        ksteps = round_up(tile.shape[1], MMA_K_STEP) // MMA_K_STEP
        if ksteps * layout.m_blocks * 4 > A_FRAG_REG_BUDGET:
            return
        frags = f"{ident(name)}_af"
        warp_m = "cake_wq" if layout.warps_n == 1 else f"(cake_wq / {layout.warps_n})"
        w = gen.w
        w.comment(f"`{name}` is loop-invariant: keep its mma.sync A fragments in registers "
                  f"({ksteps * layout.m_blocks * 4} per thread)")
        ldmatrix_fragments(w, frags, ksteps, layout.m_blocks, tile, f"{warp_m} * {layout.warp_stride} + cake_mb * 16")
        gen.a_frags[name] = frags

    def mma_sync(self, gen, node: Mma, a: SmemTile, b: SmemTile, acc: Frag | None, dst: str,  # type: ignore[no-untyped-def]
                 form: MmaForm) -> Frag:
        fn = mma_wrapper(gen, form, a.dtype)
        rows, kdim = a.shape
        cols = b.shape[1]
        kdim = padded_k(a, b, kdim)
        layout = gen.anchor if gen.anchor is not None else self.anchor_layout(gen, node)
        assert isinstance(layout, MmaFragLayout)
        if layout.nregs != rows * cols // (gen.slot.warps * THREADS_PER_WARP):
            raise Unlowerable(Code.LAYOUT, "this mma's shape differs from the role's first mma")
        warp_m = "cake_wq" if layout.warps_n == 1 else f"(cake_wq / {layout.warps_n})"
        warp_n = "0" if layout.warps_n == 1 else f"(cake_wq % {layout.warps_n}) * {layout.warp_cols}"
        # B as `c.T` (c: [N, K], K contiguous) is ldmatrix'ed as is; B as `b` ([K, N], N contiguous) through
        # ldmatrix.trans, which hands each lane the k-pairs the mma's column-major B fragment wants.
        if b.transposed:
            b_load = (f"cake_ldmatrix_x4(cake_bf, {b.base} + {b.offset_fn}({warp_n} + cake_np * 16 + (cake_lane / 16) * 8 "
                      "+ cake_lane % 8, cake_kk * 16 + ((cake_lane / 8) % 2) * 8));")
        else:
            b_load = (f"cake_ldmatrix_x4_trans(cake_bf, {b.base} + {b.offset_fn}(cake_kk * 16 + ((cake_lane / 8) % 2) * 8 "
                      f"+ cake_lane % 8, {warp_n} + cake_np * 16 + (cake_lane / 16) * 8));")
        w = gen.w
        w.comment(f"{dst} = mma({a.buffer}, {b.buffer}{'.T' if b.transposed else ''}) via mma.sync m16n8k16: warp tile "
                  f"{layout.m_blocks * 16} x {layout.n8 * 8}, {layout.m_blocks} x {layout.n8} instructions per k-step, "
                  f"{kdim // 16} k-steps")
        frag = self._dst(gen, layout, acc, dst, (rows, cols), zero=True)
        before, after = gen.mma_hooks
        if before:
            w.line(before)
        w.line("#pragma unroll")
        with w.block(f"for (int cake_kk = 0; cake_kk < {kdim // 16}; ++cake_kk)"):
            held = gen.a_frags.get(a.buffer)
            if held is None:
                w.line(f"uint32_t cake_af[{layout.m_blocks}][4];")
                w.line("#pragma unroll")
                w.line(f"for (int cake_mb = 0; cake_mb < {layout.m_blocks}; ++cake_mb) cake_ldmatrix_x4(cake_af[cake_mb], "
                       f"{a.base} + {a.offset_fn}({warp_m} * {layout.warp_stride} + cake_mb * 16 + cake_lane % 16, "
                       "cake_kk * 16 + (cake_lane / 16) * 8));")
            afrag = "cake_af[cake_mb]" if held is None else f"{held}[cake_kk][cake_mb]"
            w.line("#pragma unroll")
            with w.block(f"for (int cake_np = 0; cake_np < {layout.n8 // 2}; ++cake_np)"):
                w.line("uint32_t cake_bf[4];")
                w.line(b_load)
                w.line("#pragma unroll")
                with w.block(f"for (int cake_mb = 0; cake_mb < {layout.m_blocks}; ++cake_mb)"):
                    w.line(f"{fn}(&{frag.name}[(cake_mb * {layout.n8} + 2 * cake_np) * 4], {afrag}, &cake_bf[0]);")
                    w.line(f"{fn}(&{frag.name}[(cake_mb * {layout.n8} + 2 * cake_np + 1) * 4], {afrag}, &cake_bf[2]);")
        if after:
            w.line(after)
        return frag

    def wgmma(self, gen, node: Mma, a: SmemTile, b: SmemTile, acc: Frag | None, dst: str,  # type: ignore[no-untyped-def]
              form: MmaForm) -> Frag:
        raise Unlowerable(Code.MMA_FORM, f"wgmma needs sm_90a (target is {self.name})")

    def mma_async(self, gen, st: MmaAsync) -> None:  # type: ignore[no-untyped-def]
        raise Unlowerable(Code.MMA_FORM, f"`mma ... -> tmem` (tcgen05) needs sm_100a (target is {self.name})")

    def tmem_load(self, gen, load: Load, name: str) -> Frag:  # type: ignore[no-untyped-def]
        raise Unlowerable(Code.UNSUPPORTED, f"tensor memory needs sm_100a (target is {self.name})")

    # ------------------------------------------------------------------------------------ barriers

    def wait(self, ptr: str, parity: str) -> str:
        return f"cake_mbar_wait_sm80({ptr}, {parity});"

    def after_wait(self) -> str:
        return ""

    def before_arrive(self) -> str:
        return ""

    def init_fence(self) -> str:
        return ""

    def wait_cluster(self, ptr: str, parity: str) -> str:
        raise Unlowerable(Code.UNSUPPORTED, f"thread-block clusters need sm_90 or later (target is {self.name})")

    def arrive_cluster(self, ptr: str, ctas: int) -> str:
        raise Unlowerable(Code.UNSUPPORTED, f"thread-block clusters need sm_90 or later (target is {self.name})")

    # ------------------------------------------------------------------------------------------ TMA

    def tma_bytes(self, gen, copy: Copy) -> tuple[int, int]:  # type: ignore[no-untyped-def]
        raise Unlowerable(Code.UNSUPPORTED, f"TMA copies need sm_90 or later (target is {self.name})")

    def tma_copy(self, gen, copy: Copy, group_bytes: int | None) -> None:  # type: ignore[no-untyped-def]
        raise Unlowerable(Code.UNSUPPORTED, f"TMA copies need sm_90 or later (target is {self.name})")


class Sm90a(Sm80):
    """Hopper: TMA, try_wait, wgmma from swizzled shared memory, setmaxnreg."""

    name = "sm_90a"
    helpers = (*Sm80.helpers, "cake_tma.cuh", "cake_wgmma.cuh")

    def wait(self, ptr: str, parity: str) -> str:
        return f"cake_mbar_wait({ptr}, {parity});"

    def wait_cluster(self, ptr: str, parity: str) -> str:
        return f"cake_mbar_wait_cluster({ptr}, {parity});"

    def arrive_cluster(self, ptr: str, ctas: int) -> str:
        return f"for (uint32_t cake_c = 0; cake_c < {ctas}u; ++cake_c) cake_mbar_arrive_cluster({ptr}, cake_c);"

    def init_fence(self) -> str:
        return "cake_mbar_init_fence();"

    def wgmma_layout(self, gen, cname: str, rows: int, cols: int, form: MmaForm) -> FragLayout:  # type: ignore[no-untyped-def]
        if not self.arch.has(Feature.WGMMA):
            return super().wgmma_layout(gen, cname, rows, cols, form)
        n = form.n
        if gen.slot.warps != 4:
            raise Unlowerable(Code.MMA_FORM, f"wgmma is issued by one warpgroup; role `{gen.slot.name}` has "
                              f"{gen.slot.warps} warps per instance", help="declare the role `warpgroups 1`")
        if rows % form.m:
            raise Unlowerable(Code.MMA_FORM, f"{form.name}: the A tile's {rows} rows must be a multiple of {form.m}")
        if cols % n:
            raise Unlowerable(Code.MMA_FORM, f"{form.name}: N = {n} does not tile the {cols} columns")
        return MmaFragLayout(cname, rows // form.m, cols // 8, form.m, 16,
                             f"{form.name}, {rows // form.m} x {cols // n} instruction(s) per k-step")

    def hold_a(self, gen, name: str, tile: SmemTile) -> Value:  # type: ignore[no-untyped-def]
        """`let name = <shared stage>` whose every use is a wgmma's A operand: the stage is read once, here, into
        registers (ldmatrix fragments of each warp's 16 rows of every 64-row block; the wgmma A register layout is
        mma.sync's per warp), then a proxy fence, and the products take A from registers (no shared-memory read of
        A per instruction). Any other use keeps the stage itself (`Sm80.hold_a`)."""
        if not self.arch.has(Feature.WGMMA) or not read_only_as_wgmma_a(gen.slot.role.body, name):
            return super().hold_a(gen, name, tile)
        rows, cols = tile.shape
        m = WGMMA_ROWS
        if tile.transposed or tile.dtype.bytes != 2 or rows % m or tile.layout is None:
            raise Unlowerable(Code.MMA_FORM, f"`{name}`: a wgmma A operand held in registers is a 16-bit [M, K] "
                              f"stage with M a multiple of {m}")
        ksteps = round_up(cols, MMA_K_STEP) // MMA_K_STEP
        if ksteps * MMA_K_STEP > tile.layout.cols:
            raise Unlowerable(Code.MMA_FORM, f"`{name}`: K = {cols} needs the stage padded to whole k16 steps")
        blocks = rows // m
        frags = f"{ident(name)}_af"
        w = gen.w
        w.comment(f"`{name}` is a wgmma A operand held in registers: {ksteps} k-step(s) x {blocks} 64-row block(s) "
                  f"x 4 = {ksteps * blocks * 4} registers a thread, read once from `{tile.buffer}`")
        ldmatrix_fragments(w, frags, ksteps, blocks, tile, f"cake_mb * {m} + cake_wq * 16")
        # The stage was read through the generic proxy (ldmatrix) and a TMA copy (the async proxy) refills it once
        # it is released: order the reads before any later release [ptx: fence.proxy.async]. Without it the
        # H200 gave wrong ids at a persistent multi-tile case with the release right after this read (4 runs of 4;
        # 6 of 6 passed with it; results/h200-2026-12-04/s20/fence/).
        w.line("cake_fence_proxy_async();")
        return HeldA(tile.dtype, tile.shape, frags, tile)

    def wgmma(self, gen, node: Mma, a: SmemTile | HeldA, b: SmemTile, acc: Frag | None, dst: str,  # type: ignore[no-untyped-def]
              form: MmaForm) -> Frag:
        if not self.arch.has(Feature.WGMMA):
            return super().wgmma(gen, node, a, b, acc, dst, form)
        held = a if isinstance(a, HeldA) else None
        a_tile = held.tile if held is not None else a
        assert isinstance(a_tile, SmemTile)
        fn = mma_wrapper(gen, form, a_tile.dtype, a_registers=held is not None)
        n, m = form.n, form.m
        rows, kdim = a_tile.shape
        cols = b.shape[1]
        sw = b.swizzle_bytes
        if sw not in WGMMA_SWIZZLE or (held is None and a_tile.swizzle_bytes != sw):
            raise Unlowerable(Code.MMA_FORM, "wgmma reads its operands through shared-memory descriptors: declare "
                              "both buffers with the same swizzle (128B, 64B or 32B)",
                              help="e.g. `smem xs[2]: T[BN, D] swizzle 128B`")
        if not b.transposed:
            raise Unlowerable(Code.MMA_FORM, "wgmma reads B K-major here: write the operand as `c.T` with c: [N, K]")
        kdim = padded_k(a_tile, b, kdim)
        layout = gen.anchor if gen.anchor is not None else self.anchor_layout(gen, node)
        assert isinstance(layout, MmaFragLayout)
        a_rows, b_rows = a_tile.layout.rows, b.layout.rows  # type: ignore[union-attr]
        steps_per_atom = sw // K_STEP_BYTES
        code = WGMMA_SWIZZLE[sw]
        w = gen.w
        source = f"{held.name} (registers)" if held is not None else a_tile.buffer
        w.comment(f"{dst} = mma({source}, {b.buffer}.T) via {form.name}: {rows // m} x {cols // n} "
                  f"instruction(s) per k-step, {kdim // 16} k-steps; descriptors: {sw}B swizzle, 8-row groups "
                  f"{8 * sw} B apart, k16 step = +{K_STEP_BYTES} B inside a {sw} B atom")
        frag = self._dst(gen, layout, acc, dst, (rows, cols), zero=False)
        before, after = gen.mma_hooks
        if before:
            w.line(before)
        w.line("cake_wgmma_fence();")
        accumulate = "true" if acc is not None else "cake_kk > 0"
        w.line("#pragma unroll")
        with w.block(f"for (int cake_kk = 0; cake_kk < {kdim // 16}; ++cake_kk)"):
            if held is None:
                w.line(f"const uint32_t cake_ka = (cake_kk / {steps_per_atom}) * {a_rows * sw}u + "
                       f"(cake_kk % {steps_per_atom}) * {K_STEP_BYTES}u;")
            w.line(f"const uint32_t cake_kb = (cake_kk / {steps_per_atom}) * {b_rows * sw}u + "
                   f"(cake_kk % {steps_per_atom}) * {K_STEP_BYTES}u;")
            w.line("#pragma unroll")
            with w.block(f"for (int cake_mb = 0; cake_mb < {rows // m}; ++cake_mb)"):
                w.line("#pragma unroll")
                with w.block(f"for (int cake_nb = 0; cake_nb < {cols // n}; ++cake_nb)"):
                    w.line(f"{fn}(&{frag.name}[(cake_mb * {layout.n8} + cake_nb * {n // 8}) * 4],")
                    if held is not None:
                        w.line(f"    {held.name}[cake_kk][cake_mb],")
                    else:
                        w.line(f"    cake_wgmma_desc({a_tile.base} + cake_ka + cake_mb * {m * sw}u, 16u, "
                               f"{8 * sw}u, {code}u),")
                    w.line(f"    cake_wgmma_desc({b.base} + cake_kb + cake_nb * {n * sw}u, 16u, {8 * sw}u, {code}u),")
                    w.line(f"    {accumulate});")
        w.line("cake_wgmma_commit();")
        if after:
            w.line(after)
        w.line("cake_wgmma_wait<0>();")
        w.line(f"for (int cake_r = 0; cake_r < {layout.cname}::kRegs; ++cake_r) cake_wgmma_fence_operand({frag.name}[cake_r]);")
        return frag

    # ------------------------------------------------------------------------------------------ TMA

    def tma_plan(self, gen, copy: Copy):  # type: ignore[no-untyped-def]
        """The boxes one TMA copy issues: [(coords innermost first, smem byte offset in the stage (a C expression),
        bytes)], and the tensor map they use. A multicast copy in a cluster of C CTAs issues, from each CTA, the
        slice `cake_crank` of C of every box (rows, or the elements of a 1-D stage), which lands at the same offset
        in every CTA of the cluster (E0207 keeps each slice on whole swizzle atoms)."""
        ranks = gen.lc.cluster_ctas if copy.multicast else 1
        src = copy.source
        tensor = an.ref_name(src) or ""
        decl = gen.lc.tensor(tensor)
        if decl is None:
            raise Unlowerable(Code.TMA_BOX, f"a TMA copy reads a global tensor, not `{tensor}`")
        dtype = gen.lc.dtype(decl.type.elem)
        esize = dtype.bytes
        dims = decl.type.shape
        items = list(src.items) + [Slice(None, None)] * (len(dims) - len(src.items))
        dest = gen.dest_stage(copy.dest)
        box: list[int] = []  # outermost first, full extents
        coords: list[str] = []
        tile_axes: list[int] = []
        for d, item in enumerate(items):
            if isinstance(item, Slice):
                size_expr = dims[d] if item.size is None else item.size
                extent = an.try_value(size_expr, gen.lc.env)
                if extent is None:
                    raise Unlowerable(Code.TMA_BOX, f"TMA box extent along `{tensor}` axis {d} is not a constant")
                box.append(extent)
                coords.append("0" if item.start is None else gen.int_c(item.start))
                tile_axes.append(d)
            elif isinstance(item, NewAxis):
                raise Unlowerable(Code.TMA_BOX, "`None` in a TMA source")
            else:
                box.append(1)
                coords.append(gen.int_c(item))
        tile = [box[d] for d in tile_axes]
        if list(dest.shape) != tile:
            raise Unlowerable(Code.TMA_BOX, f"the TMA box {tile} does not match the destination stage "
                              f"{list(dest.shape)}")
        if not tile_axes or tile_axes[-1] != len(dims) - 1:
            raise Unlowerable(Code.TMA_BOX, "the innermost tensor dim must be a tile axis of a TMA copy")
        if isinstance(dest, SmemTile):
            assert dest.layout is not None
            sw = dest.swizzle_bytes
            rows, pitch = dest.layout.rows, dest.layout.pitch_bytes
            inner = dest.layout.cols  # padded to a whole k-step: the box zero-fills the padding too
        elif isinstance(dest, SmemVec):
            sw, rows, pitch, inner = 0, 1, tile[-1] * esize, tile[-1]
        else:
            raise Unlowerable(Code.TMA_BOX, "a TMA copy lands in a stage of a shared buffer")
        box_max, align = self.arch.tma_box_dim_max_elements, self.arch.tma_alignment_bytes
        inner_box = sw // esize if sw else min(inner, box_max)
        if (inner_box * esize) % align:
            raise Unlowerable(Code.TMA_BOX, f"a TMA box row of {inner_box * esize} bytes is not a multiple of {align}",
                              help=f"make the innermost extent a multiple of {align} bytes")
        row_axis = len(tile_axes) >= 2
        row_box = min(rows, box_max) if row_axis else 1
        if (row_box if row_axis else inner_box) % ranks:  # E0207 refuses this before codegen
            raise CheckerGap(f"a multicast box of {row_box if row_axis else inner_box} "
                             f"{'rows' if row_axis else 'elements'} does not split over {ranks} CTAs", copy.span)
        slice_rows = row_box // ranks if row_axis else 1
        slice_inner = inner_box if row_axis else inner_box // ranks
        box_inner_first = [slice_inner] + [slice_rows if (row_axis and d == tile_axes[-2]) else box[d]
                                           for d in reversed(range(len(dims) - 1))]
        if any(b > box_max for b in box_inner_first):
            raise Unlowerable(Code.TMA_BOX, f"TMA box {box_inner_first} exceeds {box_max} along an axis")
        tmap = gen.lc.tmap(tensor, dtype, len(dims), tuple(box_inner_first), sw)
        issues = []
        col_blocks = -(-inner // inner_box)
        row_chunks = -(-rows // row_box) if row_axis else 1
        row_step = sw if sw else pitch  # bytes from one row of a column block to the next
        for cb in range(col_blocks):
            for rc in range(row_chunks):
                c = list(reversed(coords))  # innermost first
                c[0] = c[0] if cb == 0 else f"{c[0]} + {cb * inner_box}"
                ri = len(dims) - 1 - tile_axes[-2] if row_axis else 0
                if row_axis and rc:
                    c[ri] = f"{c[ri]} + {rc * row_box}"
                if sw:
                    off = cb * rows * sw + rc * row_box * sw
                else:
                    off = cb * inner_box * esize + rc * row_box * pitch
                where = str(off)
                if ranks > 1:  # this CTA's slice of the box
                    step = slice_rows if row_axis else slice_inner
                    c[ri] = f"{c[ri]} + static_cast<int>(cake_crank) * {step}"
                    where = f"{off} + cake_crank * {slice_rows * row_step if row_axis else slice_inner * esize}u"
                nbytes = 1
                for bdim in box_inner_first:
                    nbytes *= bdim
                issues.append((c, where, nbytes * esize))
        return tmap, issues, dest, ranks

    def tma_bytes(self, gen, copy: Copy) -> tuple[int, int]:  # type: ignore[no-untyped-def]
        """(bytes the boxes deliver, bytes of the logical tile): they differ when a box zero-fills padding."""
        _, issues, dest, ranks = self.tma_plan(gen, copy)
        logical = dest.dtype.bytes
        for extent in dest.shape:
            logical *= extent
        return sum(i[2] for i in issues) * ranks, logical  # a multicast stage receives every CTA's slices

    def tma_copy(self, gen, copy: Copy, group_bytes: int | None) -> None:  # type: ignore[no-untyped-def]
        tmap, issues, dest, ranks = self.tma_plan(gen, copy)
        if copy.signals is None:
            raise Unlowerable(Code.TMA_BOX, "a TMA copy completes on an mbarrier: add `signals bar[...]`")
        bar = gen.bar_ptr(copy.signals)
        base = dest.base if isinstance(dest, SmemTile) else f"reinterpret_cast<uint8_t*>({dest.ptr})"
        w = gen.w
        lines = []
        if group_bytes is not None:
            lines.append(f"cake_mbar_arrive_expect_tx({bar}, {group_bytes}u);  // bytes of every box signalling it")
        for coords, off, nbytes in issues:
            where = f"{base} + {off}" if off != "0" else base
            if ranks > 1:
                lines.append(f"cake_tma_load_{tmap.rank}d_multicast({where}, &args.{tmap.field}, {bar}, "
                             f"static_cast<uint16_t>({(1 << ranks) - 1}), {', '.join(coords)});"
                             f"  // {nbytes} B into each of {ranks} CTAs")
                continue
            lines.append(f"cake_tma_load_{tmap.rank}d({where}, &args.{tmap.field}, {bar}, {', '.join(coords)});"
                         f"  // {nbytes} B")
        if gen.slot.issuer:
            for text in lines:
                w.line(text)
        else:
            with w.block("if (cake_rtid == 0)"):
                for text in lines:
                    w.line(text)


class Sm100a(Sm90a):
    """Blackwell: tcgen05.mma with tensor-memory accumulators; no wgmma."""

    name = "sm_100a"
    helpers = (*Sm80.helpers, "cake_tma.cuh", "cake_tcgen05.cuh")

    def after_wait(self) -> str:
        return "cake_tcgen05_fence_after();" if self.uses_tmem else ""

    def before_arrive(self) -> str:
        return "cake_tcgen05_fence_before();" if self.uses_tmem else ""

    def tmem_ref(self, gen, ref: Expr) -> tuple[str, tuple[int, int]]:  # type: ignore[no-untyped-def]
        name = an.ref_name(ref) or ""
        decl = gen.lc.tmem_decl(name)
        if decl is None:
            raise Unlowerable(Code.UNSUPPORTED, f"`{name}` is not tensor memory")
        shape = tuple(gen.lc.int_of(e) for e in decl.type.shape)
        cols = an.tmem_columns_of(decl.type, gen.lc.env)
        stage = an.ref_stage(ref)
        col = f"{gen.lc.tmem_offsets[name]}"
        if stage is not None:
            col = f"({col} + {gen.int_c(stage)} * {cols})"
        return col, (shape[0], shape[1])  # type: ignore[return-value]

    def tmem_layout(self, gen, node: Load) -> FragLayout:  # type: ignore[no-untyped-def]
        decl = gen.lc.tmem_decl(an.ref_name(node.source) or "")
        if decl is None:
            raise Unlowerable(Code.UNSUPPORTED, "`load` of tensor memory names a `tmem` buffer")
        rows, cols = (gen.lc.int_of(e) for e in decl.type.shape)
        if rows != 128 or gen.slot.warps != 4:
            raise Unlowerable(Code.LAYOUT, "a TMEM accumulator of 128 rows is read by one warpgroup (warp w reads "
                              "lanes 32w..32w+31)", help="declare the reading role `warpgroups 1`")
        if cols % TMEM_LOAD_TAIL_COLUMNS:
            raise Unlowerable(Code.LAYOUT, f"TMEM loads move 32 (or a tail of {TMEM_LOAD_TAIL_COLUMNS}) columns at "
                              f"a time; {cols} is not a multiple of {TMEM_LOAD_TAIL_COLUMNS}")
        cname = f"Frag_{gen.lc.launch.name}_{self.let_name(gen, node)}"
        gen.lc.layouts.setdefault(cname, RowPerThreadLayout(cname, cols, "tcgen05.ld 32x32b"))
        return gen.lc.layouts[cname]

    def tmem_load(self, gen, load: Load, name: str) -> Frag:  # type: ignore[no-untyped-def]
        col, (rows, cols) = self.tmem_ref(gen, load.source)
        layout = gen.anchor if isinstance(gen.anchor, RowPerThreadLayout) else self.tmem_layout(gen, load)
        w = gen.w
        w.comment(f"{name} = tensor memory rows 32*warp + lane, {cols} columns from column {col}")
        w.line(f"float {name}[{cols}];")
        lane = f"cake_tmem_base + (static_cast<uint32_t>(cake_wq * {THREADS_PER_WARP}) << 16) + {col}"
        w.line("#pragma unroll")
        w.line(f"for (int cake_c = 0; cake_c < {cols // 32}; ++cake_c) cake_tmem_load_32(&{name}[cake_c * 32], "
               f"{lane} + cake_c * 32);")
        if cols % 32:
            w.line(f"cake_tmem_load_16(&{name}[{cols // 32 * 32}], {lane} + {cols // 32 * 32});")
        w.line("cake_tmem_load_wait();")
        return Frag(DType.F32, (rows, cols), name, layout)

    def mma_async(self, gen, st: MmaAsync) -> None:  # type: ignore[no-untyped-def]
        form = parse_form(self.arch, st.form)
        m, n = form.m, form.n
        if form.family is not MmaFamily.TCGEN05:
            raise Unlowerable(Code.MMA_FORM, f"`mma ... -> tmem` takes a tcgen05 form, not `{st.form}`")
        a, b = gen.value(st.a), gen.value(st.b)
        if not isinstance(a, SmemTile) or a.transposed or not isinstance(b, SmemTile) or not b.transposed:
            raise Unlowerable(Code.MMA_FORM, "tcgen05.mma reads `a` and `b.T` from shared buffers")
        fn = mma_wrapper(gen, form, a.dtype)
        rows, kdim = a.shape
        cols = b.shape[1]
        sw = a.swizzle_bytes
        if sw not in UMMA_SWIZZLE or b.swizzle_bytes != sw:
            raise Unlowerable(Code.MMA_FORM, "tcgen05.mma reads swizzled shared memory: declare both operand "
                              "buffers with the same swizzle (128B, 64B or 32B)")
        if rows != m:
            raise Unlowerable(Code.MMA_FORM, f"{form.name} needs an A tile of {m} rows (got {rows})")
        if cols % n:
            raise Unlowerable(Code.MMA_FORM, f"{form.name}: N = {n} does not tile the {cols} columns")
        kdim = padded_k(a, b, kdim)
        col, (trows, tcols) = self.tmem_ref(gen, st.dest)
        if (trows, tcols) != (rows, cols):
            raise Unlowerable(Code.MMA_FORM, f"the TMEM accumulator is {trows} x {tcols}, the product {rows} x {cols}")
        steps = sw // K_STEP_BYTES
        code = UMMA_SWIZZLE[sw]
        a_rows, b_rows = a.layout.rows, b.layout.rows  # type: ignore[union-attr]
        accumulate = "true" if st.accumulate else "cake_kk > 0"
        w = gen.w
        lines = [f"const uint32_t cake_d = cake_tmem_base + {col};",
                 "#pragma unroll",
                 f"for (int cake_kk = 0; cake_kk < {kdim // 16}; ++cake_kk) {{",
                 f"  const uint32_t cake_ka = (cake_kk / {steps}) * {a_rows * sw}u + (cake_kk % {steps}) * {K_STEP_BYTES}u;",
                 f"  const uint32_t cake_kb = (cake_kk / {steps}) * {b_rows * sw}u + (cake_kk % {steps}) * {K_STEP_BYTES}u;",
                 "  #pragma unroll",
                 f"  for (int cake_nb = 0; cake_nb < {cols // n}; ++cake_nb)",
                 f"    {fn}(cake_d + cake_nb * {n}, cake_umma_desc({a.base} + cake_ka, 16u, {8 * sw}u, {code}u),",
                 f"        cake_umma_desc({b.base} + cake_kb + cake_nb * {n * sw}u, 16u, {8 * sw}u, {code}u), {accumulate});",
                 "}"]
        if st.signals is not None:
            lines.append(f"cake_umma_commit({gen.bar_ptr(st.signals)});  // arrives when these mmas complete")
        w.comment(f"{an.ref_name(st.dest)} {'+' if st.accumulate else ''}= {a.buffer} @ {b.buffer}.T via "
                  f"{form.name} ({cols // n} per k-step, {kdim // 16} k-steps), issued by one thread")
        with w.block("" if gen.slot.issuer else "if (cake_rtid == 0)"):
            for text in lines:
                w.line(text)


DIALECTS: dict[str, type[Sm80]] = {"sm_80": Sm80, "sm_90": Sm90a, "sm_90a": Sm90a, "sm_100a": Sm100a}


def dialect_for(arch: ArchSpec, uses_tmem: bool) -> Sm80:
    try:
        cls = DIALECTS[arch.name]
    except KeyError:
        raise Unlowerable(Code.UNSUPPORTED, f"the CUDA backend has no dialect for {arch.name}") from None
    return cls(arch, uses_tmem)


__all__ = ["DIALECTS", "Sm80", "Sm90a", "Sm100a", "dialect_for", "ident", "parse_form"]
