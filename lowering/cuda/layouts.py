"""Where tile elements live: register fragments of an mma result, and shared-memory tile layouts.

A register tile produced by an mma is spread over the threads that issued it. `FragLayout` says, for each
per-thread register `r`, which row slot and column slot it belongs to, and which tile row / column a slot
is. Reductions along rows, row vectors (`best`, `besti`) and column vectors (`||c||^2`) are laid out by the
same slots, so elementwise math between them needs no data movement.

`SmemTileLayout` gives the byte offset of element (row, col) inside one stage of a shared buffer: plain
row-major (optionally padded), or split into column blocks of `swizzle` bytes with the 16-byte-chunk XOR
pattern that TMA writes and wgmma / tcgen05 descriptors read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cake.ir import analysis as an

from cake.arch import SMEM_BANK_BYTES, SMEM_BANKS, SMEM_VECTOR_BYTES, THREADS_PER_WARP

# 16-byte chunks are the unit the swizzle permutes; the pattern repeats every 8 rows of 128 B.
SWIZZLE_CHUNK_BYTES = 16
SWIZZLE_REPEAT_ROWS = 8


@dataclass(frozen=True, slots=True)
class MmaFragLayout:
    """Accumulator fragments of mma.sync m16n8 tiles and wgmma m64nN tiles (the same per-warp pattern).

    Registers are ordered r = (mb * n8 + j) * 4 + i: `mb` a 16-row block of this warp, `j` an 8-column
    block, `i` the position in the quad pattern (i/2 selects row g or g+8, i%2 the column pair member).
    Row of slot q = mb_stride * (q/2) + warp_stride * warp_m + lane/4 + 8*(q%2); column of slot p =
    warp_cols * warp_n + 8*(p/2) + 2*(lane%4) + p%2, where warp = warp_m * warps_n + warp_n. The four lanes
    of a quad hold the same rows.
    """

    cname: str
    m_blocks: int
    n8: int
    mb_stride: int
    warp_stride: int
    origin: str  # what produced it, for the comment
    warps_n: int = 1  # warps side by side along N (mma.sync tiles too short to give every warp 16 rows)
    warp_cols: int = 0  # columns each of those warps owns

    quad: bool = True

    @property
    def nregs(self) -> int:
        return self.m_blocks * self.n8 * 4

    @property
    def nrows(self) -> int:
        return 2 * self.m_blocks

    @property
    def ncols(self) -> int:
        return 2 * self.n8

    def row_slot(self, r: int) -> int:
        return (r // (self.n8 * 4)) * 2 + (r % 4) // 2

    def col_slot(self, r: int) -> int:
        return ((r // 4) % self.n8) * 2 + r % 2

    def decl(self) -> str:
        n = self.cname
        warp_m = "warp" if self.warps_n == 1 else f"(warp / {self.warps_n})"
        warp_n = "(void)warp, " if self.warps_n == 1 else f"(warp % {self.warps_n}) * {self.warp_cols} + "
        return "\n".join([
            f"// {n}: per-thread accumulator layout of {self.origin}.",
            f"struct {n} {{",
            f"  static constexpr int kRegs = {self.nregs}, kRows = {self.nrows}, kCols = {self.ncols};",
            f"  __device__ static constexpr int row_slot(int r) {{ return (r / {self.n8 * 4}) * 2 + (r % 4) / 2; }}",
            f"  __device__ static constexpr int col_slot(int r) {{ return ((r / 4) % {self.n8}) * 2 + r % 2; }}",
            "  __device__ static int row(int q, int warp, int lane) {",
            f"    return (q / 2) * {self.mb_stride} + {warp_m} * {self.warp_stride} + lane / 4 + (q % 2) * 8;",
            "  }",
            "  __device__ static int col(int p, int warp, int lane) {",
            f"    return {warp_n}(p / 2) * 8 + (lane % 4) * 2 + p % 2;",
            "  }",
            "};",
        ])


@dataclass(frozen=True, slots=True)
class RowPerThreadLayout:
    """One full row per thread (TMEM loads of an M=128 tcgen05 accumulator with the 32x32b shape: warp w of
    the warpgroup reads lanes 32w..32w+31, each thread its lane's columns). No cross-lane reduction."""

    cname: str
    cols: int
    origin: str

    quad: bool = False

    @property
    def nregs(self) -> int:
        return self.cols

    @property
    def nrows(self) -> int:
        return 1

    @property
    def ncols(self) -> int:
        return self.cols

    def row_slot(self, r: int) -> int:
        return 0

    def col_slot(self, r: int) -> int:
        return r

    def decl(self) -> str:
        n = self.cname
        return "\n".join([
            f"// {n}: one row per thread, every column in registers ({self.origin}).",
            f"struct {n} {{",
            f"  static constexpr int kRegs = {self.cols}, kRows = 1, kCols = {self.cols};",
            "  __device__ static constexpr int row_slot(int) { return 0; }",
            "  __device__ static constexpr int col_slot(int r) { return r; }",
            f"  __device__ static int row(int, int warp, int lane) {{ return warp * {THREADS_PER_WARP} + lane; }}",
            "  __device__ static int col(int p, int, int) { return p; }",
            "};",
        ])


FragLayout = MmaFragLayout | RowPerThreadLayout


@dataclass(frozen=True, slots=True)
class SmemTileLayout:
    """Byte offsets inside one stage of a 2-D shared tile [rows, cols] of `elem_bytes` elements.

    swizzle_bytes == 0: row-major with `pitch_bytes` per row (padding allowed).
    swizzle_bytes == W: column blocks of W bytes; block `cb` holds all rows, W bytes each, at cb*rows*W;
    inside a block, byte o = row*W + x is stored at o ^ (((o >> 7) & (W/16 - 1)) << 4).
    """

    rows: int
    cols: int
    elem_bytes: int
    swizzle_bytes: int
    pitch_bytes: int

    @staticmethod
    def plain(rows: int, cols: int, elem_bytes: int, pad_bytes: int = 0) -> SmemTileLayout:
        return SmemTileLayout(rows, cols, elem_bytes, 0, cols * elem_bytes + pad_bytes)

    @staticmethod
    def swizzled(rows: int, cols: int, elem_bytes: int, swizzle_bytes: int) -> SmemTileLayout:
        return SmemTileLayout(rows, cols, elem_bytes, swizzle_bytes, swizzle_bytes)

    @property
    def stage_bytes(self) -> int:
        if self.swizzle_bytes == 0:
            return self.rows * self.pitch_bytes
        return self.col_blocks * self.rows * self.swizzle_bytes

    @property
    def col_blocks(self) -> int:
        return -(-self.cols * self.elem_bytes // self.swizzle_bytes) if self.swizzle_bytes else 1

    @property
    def block_cols(self) -> int:
        """Elements per column block (the TMA box's inner extent for swizzled layouts)."""
        return self.swizzle_bytes // self.elem_bytes if self.swizzle_bytes else self.cols

    def offset(self, row: int, col: int) -> int:
        """Python mirror of the generated offset function (used by tests)."""
        if self.swizzle_bytes == 0:
            return row * self.pitch_bytes + col * self.elem_bytes
        w = self.swizzle_bytes
        cb, x = divmod(col * self.elem_bytes, w)
        o = row * w + x
        return cb * self.rows * w + (o ^ (((o >> 7) & (w // SWIZZLE_CHUNK_BYTES - 1)) << 4))

    def offset_fn(self, name: str) -> str:
        """A C++ function `name(row, col)` returning the byte offset."""
        if self.swizzle_bytes == 0:
            body = f"return static_cast<uint32_t>(r * {self.pitch_bytes} + c * {self.elem_bytes});"
            what = f"row-major, {self.pitch_bytes} B per row"
        else:
            w = self.swizzle_bytes
            body = (f"const uint32_t o = static_cast<uint32_t>(r * {w} + (c * {self.elem_bytes}) % {w}); "
                    f"return static_cast<uint32_t>((c * {self.elem_bytes}) / {w}) * {self.rows * w}u + "
                    f"(o ^ (((o >> 7) & {w // SWIZZLE_CHUNK_BYTES - 1}u) << 4));")
            what = f"{self.col_blocks} column block(s) of {self.block_cols} elements x {self.rows} rows, swizzle {w}B"
        return (f"// byte offset of element (r, c) in one stage: {what}\n"
                f"__device__ __forceinline__ uint32_t {name}(int r, int c) {{ {body} }}")


# Consecutive lanes whose 16-byte shared requests fill one wavefront (8 x 16 B = the 32 banks x 4 B).
LANES_PER_VECTOR_WAVEFRONT = SMEM_BANKS * SMEM_BANK_BYTES // SMEM_VECTOR_BYTES


def row_chunk_offset(layout: SmemTileLayout, row: int, chunk: int) -> int:
    """Byte offset of the 16-byte chunk `chunk` of row `row`: the offset of its first element."""
    return layout.offset(row, chunk * SMEM_VECTOR_BYTES // layout.elem_bytes)


def row_chunk_problem(layout: SmemTileLayout, rows: int, cols: int) -> str | None:
    """Why a tile [rows, cols] in `layout` cannot be read one row per lane, one 16-byte load per chunk of a row
    (lane l of a warp reading row o0 + l, o0 a multiple of 32, all lanes the same chunk index), or None if it can.

    Each chunk must start 16-byte aligned and hold its elements contiguously, in column order (a 128B swizzle
    permutes whole 16-byte units of a 128-byte row segment, so it qualifies: checked here on every element rather
    than assumed), and every 8 consecutive rows must put the same chunk in 8 distinct 16-byte bank groups, so that
    the warp's 32 requests take the minimum 4 wavefronts (cake.arch.SMEM_VECTOR_BYTES). With the 128B swizzle
    chunk j of row r sits at bank group (j % 8) ^ (r % 8): 8 rows, 8 groups. A plain layout qualifies when its
    row pitch is an odd multiple of 16 bytes (the generator's staged tiles, padded by 16 B); a pitch of 256 B
    would put all 8 rows in one group (an 8-way conflict)."""
    eb = layout.elem_bytes
    per_chunk = SMEM_VECTOR_BYTES // eb
    if SMEM_VECTOR_BYTES % eb or cols % per_chunk:
        return f"a row of {cols} {8 * eb}-bit elements is not a whole number of {SMEM_VECTOR_BYTES}-byte chunks"
    if rows % LANES_PER_VECTOR_WAVEFRONT:
        return f"{rows} rows are not whole groups of {LANES_PER_VECTOR_WAVEFRONT} lanes"
    chunks = cols // per_chunk
    for r in range(rows):
        for j in range(chunks):
            start = row_chunk_offset(layout, r, j)
            if start % SMEM_VECTOR_BYTES:
                return f"chunk {j} of row {r} starts at byte {start}, not {SMEM_VECTOR_BYTES}-byte aligned"
            if any(layout.offset(r, j * per_chunk + i) != start + i * eb for i in range(per_chunk)):
                return f"the elements of chunk {j} of row {r} are not contiguous in the layout"
    wavefront = SMEM_BANKS * SMEM_BANK_BYTES
    for r0 in range(0, rows, LANES_PER_VECTOR_WAVEFRONT):
        for j in range(chunks):
            groups = Counter(row_chunk_offset(layout, r, j) % wavefront // SMEM_VECTOR_BYTES
                             for r in range(r0, r0 + LANES_PER_VECTOR_WAVEFRONT))
            if len(groups) < LANES_PER_VECTOR_WAVEFRONT:
                return (f"rows {r0}..{r0 + LANES_PER_VECTOR_WAVEFRONT - 1} put chunk {j} in {len(groups)} of the "
                        f"{LANES_PER_VECTOR_WAVEFRONT} 16-byte bank groups (a {max(groups.values())}-way bank "
                        "conflict)")
    return None


MMA_K_STEP = an.SMEM_COLUMN_STEP_ELEMENTS  # elements of K per mma instruction: tiles that feed an mma are padded to a multiple


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def declared_layout(rows: int, cols: int, elem_bytes: int, swizzle_bytes: int) -> SmemTileLayout:
    """The layout of one stage of a declared 2-D shared buffer. Columns are padded to a whole k-step so an
    mma never reads past the tile (the padding is zero-filled by the copies that land the tile)."""
    padded = round_up(cols, MMA_K_STEP)
    if swizzle_bytes:
        return SmemTileLayout.swizzled(rows, padded, elem_bytes, swizzle_bytes)
    return SmemTileLayout.plain(rows, padded, elem_bytes)
