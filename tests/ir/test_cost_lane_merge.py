"""What deferring the cross-lane merge of a running reduction saves in the cost model: the CUDA backend merges a row
minimum and its position across the quad of lanes that holds an mma fragment row every loop iteration, unless the role
defers it (`defer`), when it merges once after the loop. The per-element price of a reduction includes the merge (the
priors were calibrated on code that merges every iteration); since CUDA codegen 4 a deferral saves the issue slots its
SASS shows (`lane_merge_ops_per_row`), so a deferred child is no longer predicted equal to its parent, and no schedule
that merges every iteration is priced differently.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cake.ir import cost
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors, constants_for
from cake.ir.parser import parse
from cake.ir.transforms.defer_merge import defer_merge

FK = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
CELL = {"B": 8, "N": 16384, "K": 1024, "D": 128}


def _cuda_ops(text: str, backend: str, *, defer: bool) -> float:
    kernel = parse(text)
    if defer:
        deferred = defer_merge(kernel)
        assert deferred is not None, "the schedule has a running reduction to defer"
        kernel = deferred
    prediction = predict(kernel, dims=CELL, backend=backend, factors=Factors())
    return sum(launch.work.cuda_ops for launch in prediction.launches)


def test_the_merge_price_is_the_sass_the_deferral_removes() -> None:
    # SASS of the ping-pong consumer's k loop (nvcc 13.0.88, sm_90a, results/cpu-2026-12-05/defer_kloop_sass_*.json):
    # deferring removes 60 instructions a warp an iteration, 16 of them SHFL (4 lane slots each against 1), for the
    # 32 rows a warp holds (two m64 blocks of 16 rows a warp): the pair (minimum and position) costs 108 a row.
    consts = constants_for("sm_90a", "cuda", codegen="4")
    assert 2 * consts.lane_merge_ops_per_row == pytest.approx(((60 - 16) * 32 + 16 * 128) / 32)
    assert constants_for("sm_90a", "cuda", codegen="1").lane_merge_ops_per_row == 0  # unmeasured before codegen 4
    assert constants_for("sm_90a", "triton").lane_merge_ops_per_row == 0  # Triton's merge is its reduction's price


@pytest.mark.parametrize("schedule", ["assign_pingpong", "assign_pingpong_rs"])
def test_a_deferred_merge_saves_every_iteration_but_one(schedule: str) -> None:
    text = (FK / f"{schedule}.cake").read_text()
    merged, deferred = _cuda_ops(text, "cuda", defer=False), _cuda_ops(text, "cuda", defer=True)
    consts = constants_for("sm_90a", "cuda")
    bn, bk, consumers = 128, 128, 2  # the shipped params: a consumer's rows, its k step, consumers a CTA
    iterations = -(-CELL["K"] // bk)
    # two reductions a row (min, argmin) per consumer, each merged once instead of once an iteration
    saved = consumers * 2 * bn * (iterations - 1) * consts.lane_merge_ops_per_row
    assert merged - deferred == pytest.approx(saved)


def test_a_backend_that_prices_no_merge_sees_no_difference() -> None:
    text = (FK / "assign_pingpong.cake").read_text()
    assert _cuda_ops(text, "triton", defer=False) == _cuda_ops(text, "triton", defer=True)


def test_a_schedule_that_merges_every_iteration_is_priced_as_without_the_term(monkeypatch) -> None:
    text = (FK / "assign_pingpong.cake").read_text()
    with_term = _cuda_ops(text, "cuda", defer=False)
    real = cost.constants_for
    monkeypatch.setattr(cost, "constants_for", lambda *a, **k: replace(real(*a, **k), lane_merge_ops_per_row=0.0))
    assert _cuda_ops(text, "cuda", defer=False) == with_term
    assert _cuda_ops(text, "cuda", defer=True) == with_term  # and with nothing to save, a deferral saves nothing


def test_a_deferral_never_makes_a_reduction_cheaper_than_free(monkeypatch) -> None:
    text = (FK / "assign_pingpong.cake").read_text()
    real = cost.constants_for
    merged = _cuda_ops(text, "cuda", defer=False)
    savings = []
    for absurd in (1e9, 2e9):  # a merge priced past any reduction: the saving stops at the reductions' own price
        monkeypatch.setattr(cost, "constants_for",
                            lambda *a, absurd=absurd, **k: replace(real(*a, **k), lane_merge_ops_per_row=absurd))
        savings.append(merged - _cuda_ops(text, "cuda", defer=True))
    assert savings[0] == savings[1]
    assert 0 < savings[0] < merged
