"""The CUDA backend's sum of a tile no mma lays out (`coop_reduce`): a row sum of one 16-bit shared tile takes the
one-row-per-lane form (each lane walks its row in 16-byte chunks, no shuffles); other sums of whole warps' worth of
outputs the warp-transposed form (lanes across each of 32 lines, then a butterfly that leaves line l's total in
lane l); other reductions one warp per output. The butterfly is checked by running its exchange rule on 32
simulated lanes (the same `butterfly_steps` the generator emits, the same keep/send choice), the row-per-lane form's
chunk offsets and bank spread by a closed-form model of the 128B swizzle against the layout and the C offset
function it emits, and the generated code is compiled."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
from cake.ir.nodes import DType
from cake.lowering.cuda.compile import compile_cubin
from cake.lowering.cuda.layouts import SmemTileLayout, row_chunk_offset, row_chunk_problem
from cake.lowering.cuda.program import CudaProgram, generate
from cake.lowering.cuda.reductions import butterfly_steps, one_row_per_lane
from cake.lowering.cuda.values import Elem, Lazy, Map, Scalar, SmemTile, Value, replace_leaf
from cuda_cases import HAVE_NVCC, NO_NVCC, compiled, program, read

LANES = 32
ROW_PER_LANE = "one row per lane"
TRANSPOSED = "transposing butterfly"


def butterfly(values: list[list[float]]) -> list[float]:
    """values[lane][line]: each lane's partial sums of 32 lines -> each lane's value after the exchange, by the
    generator's rule: at step `half`, lane l keeps cake_v[i + half] if bit `half` of l is set (else cake_v[i]),
    sends the other half, and adds what lane l ^ half sent."""
    v = [list(row) for row in values]
    for half in butterfly_steps(LANES):
        sent = [[v[lane][i] if lane & half else v[lane][i + half] for i in range(half)] for lane in range(LANES)]
        for lane in range(LANES):
            keep = [v[lane][i + half] if lane & half else v[lane][i] for i in range(half)]
            v[lane][:half] = [k + s for k, s in zip(keep, sent[lane ^ half], strict=True)]
    return [v[lane][0] for lane in range(LANES)]


def test_the_butterfly_leaves_line_l_in_lane_l() -> None:
    assert butterfly_steps(LANES) == (16, 8, 4, 2, 1)
    rng = random.Random(0)
    partial = [[float(rng.randint(-1000, 1000)) for _ in range(LANES)] for _ in range(LANES)]  # exact in float
    totals = butterfly(partial)
    assert totals == [sum(partial[lane][line] for lane in range(LANES)) for line in range(LANES)]


# ----------------------------------------------------------------------------------- which form a schedule gets

SHARED_TILE_NORMS = ("assign_pingpong_prodnorm.cake", "assign_pingpong_fused.cake")  # ||c||^2 of a `cs` stage
PRODNORM = "experiments/kmeans/assign_pingpong_prodnorm.cake"


@pytest.mark.parametrize("t", ["bf16", "f16"])
@pytest.mark.parametrize("rel", SHARED_TILE_NORMS)
def test_a_row_sum_of_a_shared_16_bit_tile_is_one_row_per_lane(rel: str, t: str) -> None:
    source = program(f"experiments/kmeans/{rel}", dtypes=(("T", t),)).source
    assert f"sum(axis=1) into 128 outputs: {ROW_PER_LANE}, 16 16-byte chunks a row" in source
    ctype = {"bf16": "__nv_bfloat16", "f16": "__half"}[t]
    assert f"{ctype} cake_h[8];" in source
    # one 16-byte load per chunk at the chunk's first element, the tile expression on the unpacked registers
    assert "cake_unpack8(cake_lds_v4((cs + s * 32768) + cs_off(cake_row, cake_j * 8)), cake_h);" in source
    assert "cake_p[cake_i] += (cake_to_f32(cake_h[cake_i]) * cake_to_f32(cake_h[cake_i]));" in source
    assert TRANSPOSED not in source and "one warp per output" not in source


@pytest.mark.parametrize(("rel", "arch", "tile"), [
    ("assign_plain.cake", None, "`ct`"),           # the centroid tile the backend stages for the mma (272-byte rows)
    ("assign_plain.cake", "sm_80", "`ct`"),
    ("assign_cp_async.cake", None, "`cs`"),        # a cp.async stage, swizzle 128B
])
def test_other_shared_16_bit_tiles_are_summed_one_row_per_lane_too(rel: str, arch: str | None, tile: str) -> None:
    source = program(f"experiments/kmeans/{rel}", arch).source
    assert f"sum(axis=1) into 64 outputs: {ROW_PER_LANE}, 16 16-byte chunks a row (ld.shared.v4 at the chunk's " \
           f"offset in {tile}'s layout" in source
    assert TRANSPOSED not in source


@pytest.mark.parametrize("rel", ["assign_pingpong.cake", "assign_pingpong_x2.cake", "assign_plain_norms.cake",
                                 "assign_tcgen05.cake"])
def test_a_sum_of_global_tiles_stays_warp_transposed(rel: str) -> None:
    """||c||^2 read straight from global memory (the norms launches): lanes across each centroid, coalesced."""
    source = program(f"experiments/kmeans/{rel}").source
    assert "sum(axis=1) into 64 outputs: 32 lines a warp" in source and TRANSPOSED in source
    assert "not one row per lane: the summed tile is not in shared memory" in source
    assert ROW_PER_LANE + "," not in source and "one warp per output" not in source


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_the_warp_transposed_form_compiles_without_a_stack() -> None:
    """cake_v stays in registers: every butterfly index is a constant (a dynamic one put it on the stack)."""
    module = compiled("experiments/kmeans/assign_pingpong.cake")
    assert all((k.stack_frame_bytes, k.spill_bytes) == (0, 0) for k in module.report.kernels), module.report.table()


def prodnorm_at(d: int) -> CudaProgram:
    kernel, _ = read(PRODNORM)
    return generate(kernel, kernel.target, static_dims={"D": d}, file=PRODNORM)


@pytest.mark.parametrize(("d", "form"), [
    (8, f"{ROW_PER_LANE}, 1 16-byte chunks a row"),     # a row of one chunk
    (72, f"{ROW_PER_LANE}, 9 16-byte chunks a row"),    # not a multiple of the 4 chunks in flight
    (17, "not one row per lane: a row of 17 16-bit elements is not a whole number of 16-byte chunks"),
])
def test_the_row_length_decides_with_the_layout(d: int, form: str) -> None:
    """The gates vary D (kmeans_assign's domain: 8..128 and 1, 3, 17, 33): rows that are not whole 16-byte chunks
    keep the warp-transposed form."""
    assert form in prodnorm_at(d).source


def test_the_tile_expression_is_evaluated_on_the_registers_with_its_scalars() -> None:
    """A scalar factor stays in the expression; only the shared-tile leaf is read from the chunk registers."""
    tile = SmemTile(DType.BF16, (128, 128), "cs_base", SmemTileLayout.swizzled(128, 128, 2, 128), "cs_off", "cs", 128)
    widened = Map(DType.F32, tile.shape, (tile,), lambda p: f"cake_to_f32({p[0]})", "cast")
    expr = Map(DType.F32, tile.shape, (Scalar(DType.F32, (), "0.5f"), widened, widened),
               lambda p: f"({p[0]} * {p[1]} * {p[2]})")
    regs = Lazy(DType.BF16, tile.shape, lambda idx: "cake_h[cake_i]")
    rebuilt = replace_leaf(expr, tile, regs)
    e = Elem.generic("cake_row", "(cake_j * 8 + cake_i)")
    assert rebuilt.at(e) == "(0.5f * cake_to_f32(cake_h[cake_i]) * cake_to_f32(cake_h[cake_i]))"
    assert "cs_off" in expr.at(e)  # the original is untouched
    assert one_row_per_lane(expr, 1, 128) == tile


def _tile(dtype: DType = DType.BF16, layout: SmemTileLayout | None = None, transposed: bool = False) -> SmemTile:
    layout = layout or SmemTileLayout.swizzled(128, 128, dtype.bytes, 128)
    return SmemTile(dtype, (128, 128), "base", layout, "off", "cs", layout.swizzle_bytes, transposed)


def _square(v: Value) -> Map:
    return Map(DType.F32, v.shape, (v, v), lambda p: f"({p[0]} * {p[1]})")


@pytest.mark.parametrize(("src", "axis", "why"), [
    (_square(_tile()), 0, "the sum runs down columns (axis 0)"),
    (Map(DType.F32, (128, 128), (_tile(), _tile(layout=SmemTileLayout.plain(128, 128, 2, 16))),
         lambda p: "0"), 1, "reads 2 tiles or vectors"),
    (_square(Lazy(DType.BF16, (128, 128), lambda idx: "g")), 1, "not in shared memory"),
    (_square(_tile(transposed=True)), 1, "read transposed"),
    (_square(_tile(DType.F32)), 1, "holds f32, not a 16-bit type"),
    (_square(_tile(layout=SmemTileLayout.plain(128, 128, 2))), 1, "8-way bank conflict"),  # 256-byte pitch
])
def test_anything_else_keeps_the_warp_transposed_form_and_says_why(src: Value, axis: int, why: str) -> None:
    reason = one_row_per_lane(src, axis, 128)
    assert isinstance(reason, str) and why in reason


def test_a_padded_plain_tile_qualifies() -> None:
    """The generator's staged tiles (pitch 272 B = 17 x 16) put 8 consecutive rows in 8 bank groups."""
    padded = _tile(layout=SmemTileLayout.plain(128, 128, 2, 16))
    assert one_row_per_lane(_square(padded), 1, 128) == padded


# ------------------------------------------------------------------------------------------- the index math

ROWS, COLS, SWIZZLE, ELEM = 128, 128, 128, 2  # a `cs` stage: bf16/f16 [BK = 128, D = 128] swizzle 128B
CHUNKS = COLS * ELEM // 16


def model_chunk_offset(r: int, j: int) -> int:
    """The 128B swizzle's chunk offset in closed form: column block j // 8 (64 elements, ROWS x 128 B), row r's
    128-byte line in it, and 16-byte unit (j % 8) XOR (r % 8) inside the line."""
    return (j // 8) * ROWS * SWIZZLE + r * SWIZZLE + (((j % 8) ^ (r % 8)) * 16)


def c_offset_function(layout: SmemTileLayout):  # type: ignore[no-untyped-def]
    """The C offset function the generator emits (`cs_off(r, c)`), evaluated with Python integers (operands are
    non-negative and small, so C's unsigned `/`, `%`, `^`, `>>`, `&` agree with Python's)."""
    text = layout.offset_fn("cs_off")
    body = re.search(r"\{ const uint32_t o = (.*?); return (.*?); \}", text)
    assert body, text

    def py(expr: str) -> str:
        return re.sub(r"(\d+)u\b", r"\1", expr.replace("static_cast<uint32_t>", "")).replace("/", "//")

    o_expr, ret = py(body.group(1)), py(body.group(2))
    def offset(r: int, c: int) -> int:
        o = eval(o_expr, {}, {"r": r, "c": c})  # noqa: S307 -- our own generated arithmetic
        return eval(ret, {}, {"o": o, "c": c})  # type: ignore[no-any-return]  # noqa: S307

    return offset


def test_a_chunk_of_the_swizzled_stage_is_contiguous_at_the_modelled_offset() -> None:
    """For rows 0..127 and chunks 0..15: the layout's element (r, 8j + i) lies at model(r, j) + 2i, and the C
    function the 16-byte load's address comes from (`cs_off(row, 8j)`) gives model(r, j)."""
    layout = SmemTileLayout.swizzled(ROWS, COLS, ELEM, SWIZZLE)
    c_off = c_offset_function(layout)
    for r in range(ROWS):
        for j in range(CHUNKS):
            start = model_chunk_offset(r, j)
            assert start % 16 == 0
            assert [layout.offset(r, 8 * j + i) for i in range(8)] == [start + 2 * i for i in range(8)]
            assert row_chunk_offset(layout, r, j) == c_off(r, 8 * j) == start


def test_32_rows_reading_one_chunk_index_take_the_minimum_wavefronts() -> None:
    """What is checked, per warp (rows 32w .. 32w+31, lane l on row 32w + l) and chunk index j: the 32 16-byte
    requests touch 128 4-byte words, and (a) every one of the 32 banks serves exactly 4 of them — the fewest
    possible for 512 bytes, i.e. 4 wavefronts — and (b) each 8 consecutive lanes' requests cover the 32 banks
    exactly once (no conflict inside any quarter-warp). The layout check the lowering runs agrees."""
    layout = SmemTileLayout.swizzled(ROWS, COLS, ELEM, SWIZZLE)
    for w in range(ROWS // LANES):
        for j in range(CHUNKS):
            words = [(model_chunk_offset(32 * w + lane, j) // 4 + k, lane) for lane in range(LANES) for k in range(4)]
            per_bank = Counter(word % 32 for word, _ in words)
            assert set(per_bank) == set(range(32)) and set(per_bank.values()) == {4}
            for q in range(4):
                quarter = sorted(word % 32 for word, lane in words if lane // 8 == q)
                assert quarter == list(range(32))
    assert row_chunk_problem(layout, ROWS, COLS) is None


# ------------------------------------------------------------------------------------------------- compiled

@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
@pytest.mark.parametrize("t", ["bf16", "f16"])
@pytest.mark.parametrize("rel", SHARED_TILE_NORMS)
def test_the_row_per_lane_schedules_compile_without_a_stack_or_spills(rel: str, t: str) -> None:
    """The producer of assign_pingpong_prodnorm runs the row sum at 56 registers (setmaxnreg): a lane keeps only
    ROW_PER_LANE_CHUNKS_IN_FLIGHT chunks of loads live (the whole row at once spilled)."""
    module = compiled(f"experiments/kmeans/{rel}", dtypes=(("T", t),))
    assert [(k.stack_frame_bytes, k.spill_bytes) for k in module.report.kernels] == [(0, 0)]


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_a_row_of_chunks_not_a_multiple_of_those_in_flight_compiles() -> None:
    prog = prodnorm_at(72)
    module = compile_cubin(prog.source, prog.arch, smem_dynamic_bytes={c.kname: c.smem_bytes for c in prog.launches},
                           file=PRODNORM)
    assert [(k.stack_frame_bytes, k.spill_bytes) for k in module.report.kernels] == [(0, 0)]
