"""The CUDA backend's row sum of a 16-bit shared tile in the cost model, per codegen version: since codegen 4
(`lowering/cuda/reductions.py` `row_per_lane_sum`) a lane owns a row and reads it in 16-byte chunks, so the model
prices the sum at the issue its SASS shows per element, not from its parts (the 24-slot swizzled elementwise read,
the cast, the square, the add), and puts the busiest lane's rows in the iteration chain whole."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors, constants_for, current_codegen
from cake.ir.parser import parse
from cake.lowering.cuda.program import CODEGEN_VERSION
from cake.lowering.runtime import lower

FK = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
S5 = {"B": 8, "N": 16384, "K": 1024, "D": 128}


def _work(schedule: str, params: dict[str, int], codegen: str | None = None) -> tuple[float, float, float]:
    """(cuda ops, row-sum ops, busiest lane's row-sum ops) per tile of the launch with the most row-sum work."""
    kernel = parse((FK / f"{schedule}.cake").read_text())
    prediction = predict(kernel, dims=S5, params=params, backend="cuda", factors=Factors(), codegen=codegen)
    work = max((lp.work for lp in prediction.launches), key=lambda w: (w.row_sum_ops, w.cuda_ops))
    return work.cuda_ops, work.row_sum_ops, work.row_sum_lane_ops


def test_the_constants_describe_the_codegen_version_that_generated_the_code() -> None:
    assert current_codegen("cuda") == CODEGEN_VERSION  # the default is what the backend generates now
    now, old = constants_for("sm_90a", "cuda"), constants_for("sm_90a", "cuda", codegen="1")
    assert now.row_sum_ops_per_element == constants_for("sm_90a", "cuda", codegen="4").row_sum_ops_per_element > 0
    assert old.row_sum_ops_per_element == 0  # codegen 1 summed a warp per row: priced from its parts
    assert constants_for("sm_90a", "triton").row_sum_ops_per_element == 0
    with pytest.raises(ValueError, match="integer version"):
        constants_for("sm_90a", "cuda", codegen="1-or-2")


def test_the_row_sum_price_is_its_sass_per_element() -> None:
    # SASS of the chunk loop (nvcc 13.0.88, sm_90a, unrolled 4 chunks = 32 elements a lane): 32 FFMA, 33 IMAD.U32
    # and 16 SHF (bf16 -> f32), 4 LDS.128, 6 loop control.
    assert constants_for("sm_90a", "cuda").row_sum_ops_per_element == pytest.approx((32 + 33 + 16 + 4 + 6) / 32,
                                                                                    abs=0.01)


# (schedule, params): the model prices a row-per-lane sum exactly where the backend generates one.
AGREEMENT = [
    ("assign_plain", {"BN": 128, "BK": 64, "WARPS": 4}),  # `ct` loaded, staged in shared memory, 64 rows
    ("assign_plain", {"BN": 128, "BK": 16, "WARPS": 4}),  # 16 rows: not whole warps' worth, a warp per output
    ("assign_pingpong_fused", {"BK": 128}),  # the consumers sum the TMA stage they wait on
    ("assign_pingpong_prodnorm", {}),  # the producer sums it into a shared stage
    ("assign_pingpong_normwg", {}),  # a warpgroup of its own does
    ("assign_pingpong", {}),  # norms come from a first launch: no row sum in the assign
]


@pytest.mark.parametrize(("schedule", "params"), AGREEMENT)
def test_the_model_prices_a_row_per_lane_sum_where_the_backend_generates_one(schedule: str,
                                                                           params: dict[str, int]) -> None:
    _, row_sum_ops, _ = _work(schedule, params)
    source = lower(parse((FK / f"{schedule}.cake").read_text()), "cuda", params=params).source
    # since codegen 4 a sum of fewer than whole warps' worth of rows is priced as its warp-per-output form (below)
    assert (row_sum_ops > 0) == ("one row per lane" in source or "one warp per output" in source)


def test_the_fused_ping_pong_sums_each_stage_at_the_row_sum_price_and_one_row_a_lane() -> None:
    rows, d, iterations, consumers = 128, 128, 1024 // 128, 2
    price = constants_for("sm_90a", "cuda").row_sum_ops_per_element
    ops, row_sum_ops, lane_ops = _work("assign_pingpong_fused", {"BK": rows})
    assert row_sum_ops == pytest.approx(consumers * iterations * rows * d * price)
    # A consumer warpgroup's 128 lanes own the 128 rows: each lane walks one row of D per iteration.
    assert lane_ops == pytest.approx(iterations * math.ceil(rows / 128) * d * price)
    # Codegen 1 priced the same sum from its parts, the swizzled elementwise read (24 slots) first among them.
    old_ops, old_row_sum_ops, _ = _work("assign_pingpong_fused", {"BK": rows}, codegen="1")
    assert old_row_sum_ops == 0
    assert old_ops - ops > consumers * iterations * rows * d * (24 - price)


def test_a_narrow_wgmma_form_rereads_its_a_operand_once_per_instruction() -> None:
    # prodnorm's consumers: A = xs[w] (128 x 128 bf16), B = cs[s] (128 x 128); m64n128k16 reads A once and B twice
    # (two 64-row instructions); m64n16k16 reads A 128 / 16 = 8 times: 7 more passes over A per product.
    text = (FK / "assign_pingpong_prodnorm.cake").read_text()
    assert "via wgmma.m64n128k16" in text

    def smem(form: str) -> float:
        kernel = parse(text.replace("via wgmma.m64n128k16", f"via {form}"))
        prediction = predict(kernel, dims=S5, backend="cuda", factors=Factors())
        return prediction.launches[0].work.smem_bytes

    consumers, iterations, a_bytes = 2, 1024 // 128, 128 * 128 * 2
    assert smem("wgmma.m64n16k16") - smem("wgmma.m64n128k16") == pytest.approx(consumers * iterations * 7 * a_bytes)


# ---- the same sum when its outputs are not whole warps' worth: a warp per output (`coop_reduce`) ----

def _fused_at(bk: int) -> str:
    """assign_pingpong_fused at a centroid tile of `bk` rows (the wgmma's n equal to BK, as the runs mutated it)."""
    text = (FK / "assign_pingpong_fused.cake").read_text()
    assert "param BK = 128 in {64, 128, 256}" in text and "via wgmma.m64n128k16" in text
    return text.replace("param BK = 128 in {64, 128, 256}", f"param BK = {bk} in {{{bk}}}") \
        .replace("via wgmma.m64n128k16", f"via wgmma.m64n{bk}k16")


def test_the_warp_per_output_price_is_its_sass() -> None:
    # SASS of coop_reduce's output loop (nvcc 13.0.88, sm_90a, the fused ping-pong at BK=120, D=128): 39
    # instructions an output, of which 4 LDS.U16 + 4 IMAD.U32 + 4 FFMA read and add a lane's 4 elements; the other
    # 27 are 22 plain instructions and 5 SHFL.BFLY, a shuffle taking 4 of the SM's FP32 lane slots (32 vs 128 a clock).
    consts = constants_for("sm_90a", "cuda")
    d = 128
    assert consts.warp_row_sum_ops_per_element * d == pytest.approx(12 * 32)
    assert consts.warp_row_sum_ops_per_row == pytest.approx(22 * 32 + 5 * 128)
    assert constants_for("sm_90a", "cuda", codegen="1").warp_row_sum_ops_per_element == 0  # before codegen 4: parts
    assert constants_for("sm_90a", "triton").warp_row_sum_ops_per_element == 0


@pytest.mark.parametrize("bk", [120, 128])
def test_the_model_prices_a_warp_per_output_sum_where_the_backend_generates_one(bk: int) -> None:
    text = _fused_at(bk)
    source = lower(parse(text), "cuda").source
    assert ("one warp per output" in source) == (bk % 32 != 0)
    assert ("one row per lane" in source) == (bk % 32 == 0)
    prediction = predict(parse(text), dims=S5, backend="cuda", factors=Factors())
    assert prediction.launches[0].work.row_sum_ops > 0  # priced as the backend issues it either way


def test_a_warp_per_output_sum_costs_its_rows_and_the_busiest_warp_issues_its_rows_in_turn() -> None:
    consts = constants_for("sm_90a", "cuda")
    rows, d, iterations, consumers, warps = 120, 128, -(-1024 // 120), 2, 4
    kernel = parse(_fused_at(rows))
    work = predict(kernel, dims=S5, backend="cuda", factors=Factors()).launches[0].work
    per_row = d * consts.warp_row_sum_ops_per_element + consts.warp_row_sum_ops_per_row
    assert work.row_sum_ops == pytest.approx(consumers * iterations * rows * per_row)
    # a consumer warpgroup's 4 warps take 30 rows each, one after another, a warp instruction per 32 lane slots
    assert work.row_sum_lane_ops == pytest.approx(iterations * math.ceil(rows / warps) * per_row / 32)
    # it costs more than the one-row-per-lane sum of whole warps' worth of rows (5 dependent shuffles an output)
    whole = predict(parse(_fused_at(128)), dims=S5, backend="cuda", factors=Factors()).launches[0].work
    assert work.row_sum_lane_ops / iterations > whole.row_sum_lane_ops / (1024 // 128)
