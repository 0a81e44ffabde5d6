"""Where elements live: the generated fragment-layout formulas cover each tile exactly once and agree with
the PTX-documented accumulator layouts; the shared-memory swizzle is a permutation of 16-byte chunks that
keeps ldmatrix / wgmma reads conflict-free."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from cake.lowering.cuda.layouts import MmaFragLayout, RowPerThreadLayout, SmemTileLayout


def c_function(decl: str, name: str):  # type: ignore[no-untyped-def]
    """Evaluate a generated one-line C++ layout function with Python integers (non-negative operands:
    C's `/` is floor division there)."""
    m = re.search(rf"static (?:constexpr )?int {name}\(([^)]*)\) \{{\s*(?:\(void\)warp, )?return (.*?);\s*\}}",
                  decl, re.S)
    assert m, f"{name} not found"
    params = [p.split()[-1] if len(p.split()) > 1 else f"_{i}" for i, p in enumerate(m.group(1).split(","))]
    body = m.group(2).replace("(void)warp, ", "").replace("/", "//")
    return eval(f"lambda {', '.join(params)}: {body}")  # noqa: S307 -- our own generated arithmetic


def cover(layout: MmaFragLayout | RowPerThreadLayout, warps: int) -> Counter[tuple[int, int]]:
    decl = layout.decl()
    row_slot, col_slot = c_function(decl, "row_slot"), c_function(decl, "col_slot")
    row, col = c_function(decl, "row"), c_function(decl, "col")
    seen: Counter[tuple[int, int]] = Counter()
    for warp in range(warps):
        for lane in range(32):
            for r in range(layout.nregs):
                assert row_slot(r) == layout.row_slot(r) and col_slot(r) == layout.col_slot(r)
                seen[(row(row_slot(r), warp, lane), col(col_slot(r), warp, lane))] += 1
    return seen


@pytest.mark.parametrize(("rows", "cols", "warps", "warps_n"), [(128, 64, 4, 1), (128, 128, 8, 1), (32, 128, 4, 2)])
def test_mma_sync_fragments_cover_the_tile_once(rows: int, cols: int, warps: int, warps_n: int) -> None:
    wm = warps // warps_n
    layout = MmaFragLayout("L", rows // wm // 16, cols // warps_n // 8, 16, rows // wm, "test", warps_n,
                           cols // warps_n)
    seen = cover(layout, warps)
    assert set(seen) == {(r, c) for r in range(rows) for c in range(cols)}
    assert set(seen.values()) == {1}


def test_wgmma_fragments_match_the_ptx_layout() -> None:
    """m64nNk16 accumulator i of warp w, lane (g, t): row 16w + g + 8*((i/2)%2), column 8*(i/4) + 2t + i%2,
    per 64-row instruction block; the generator stacks two m64 blocks for a 128-row tile."""
    layout = MmaFragLayout("L", 2, 16, 64, 16, "wgmma m64n128k16 x2")
    decl = layout.decl()
    row, col = c_function(decl, "row"), c_function(decl, "col")
    for warp in range(4):
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for r in range(layout.nregs):
                block, i = divmod(r, 64)
                want = (64 * block + 16 * warp + g + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * t + i % 2)
                assert (row(layout.row_slot(r), warp, lane), col(layout.col_slot(r), warp, lane)) == want
    assert set(cover(layout, 4).values()) == {1}


def test_tmem_rows_one_per_thread() -> None:
    layout = RowPerThreadLayout("T", 128, "tcgen05.ld 32x32b")
    seen = cover(layout, 4)
    assert set(seen) == {(r, c) for r in range(128) for c in range(128)} and set(seen.values()) == {1}


@pytest.mark.parametrize("swizzle", [128, 64, 32])
def test_swizzle_permutes_16_byte_chunks(swizzle: int) -> None:
    layout = SmemTileLayout.swizzled(64, 128, 2, swizzle)
    offsets = [layout.offset(r, c) for r in range(64) for c in range(128)]
    assert sorted(offsets) == list(range(0, layout.stage_bytes, 2))  # a bijection onto the stage
    for r in range(64):
        for c in range(0, 128, 8):  # each 16-byte chunk stays contiguous
            assert [layout.offset(r, c + j) for j in range(8)] == [layout.offset(r, c) + 2 * j for j in range(8)]


def test_swizzle_128b_reads_are_conflict_free() -> None:
    """ldmatrix reads 8 rows x 16 B at one logical column; with 128B swizzle they hit 8 distinct bank groups."""
    layout = SmemTileLayout.swizzled(128, 128, 2, 128)
    for c in range(0, 128, 8):
        for r0 in range(0, 128, 8):
            groups = {(layout.offset(r0 + i, c) // 16) % 8 for i in range(8)}
            assert len(groups) == 8


def test_swizzle_matches_tma_pattern_and_offset_function_text() -> None:
    """The 128B pattern: chunk index XOR (row % 8) inside a 128-byte row, blocks of 64 bf16 columns."""
    layout = SmemTileLayout.swizzled(128, 128, 2, 128)
    for r in range(16):
        for chunk in range(16):
            block, inner = divmod(chunk, 8)
            assert layout.offset(r, chunk * 8) == block * 128 * 128 + r * 128 + ((inner ^ (r % 8)) * 16)
    fn = layout.offset_fn("xs_off")
    assert "(o ^ (((o >> 7) & 7u) << 4))" in fn and "16384u" in fn


def test_padded_staging_rows_are_conflict_free() -> None:
    layout = SmemTileLayout.plain(128, 128, 2, 16)
    assert layout.pitch_bytes == 272
    for c in range(0, 128, 8):
        assert len({(layout.offset(r, c) // 16) % 8 for r in range(8)}) == 8
