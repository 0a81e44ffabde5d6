"""The CUDA backend's sum of a tile no mma lays out (`coop_reduce`): whole warps' worth of outputs take the
warp-transposed form (lanes across each of 32 lines, then a butterfly that leaves line l's total in lane l), other
reductions one warp per output. The butterfly is checked by running its exchange rule on 32 simulated lanes (the
same `butterfly_steps` the generator emits, the same keep/send choice), and the generated code is compiled."""

from __future__ import annotations

import random

import pytest
from cake.lowering.cuda.reductions import butterfly_steps
from cuda_cases import HAVE_NVCC, NO_NVCC, compiled, program

LANES = 32


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


@pytest.mark.parametrize(("rel", "launch_text"), [
    ("assign_pingpong_fused.cake", "sum(axis=1) into 128 outputs"),   # ||c||^2 of the shared centroid tile
    ("assign_pingpong.cake", "sum(axis=1) into 64 outputs"),          # the centroid_norms launch
    ("assign_plain.cake", "sum(axis=1) into 64 outputs"),             # per-tile ||c||^2 (BK = 64)
])
def test_a_sum_of_whole_warps_of_outputs_is_warp_transposed(rel: str, launch_text: str) -> None:
    source = program(f"experiments/kmeans/{rel}").source
    assert launch_text in source and "transposing butterfly" in source
    assert "one warp per output" not in source


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_the_fused_ping_pong_compiles_without_a_stack() -> None:
    """cake_v stays in registers: every butterfly index is a constant (a dynamic one put it on the stack)."""
    module = compiled("experiments/kmeans/assign_pingpong_fused.cake")
    assert [(k.stack_frame_bytes, k.spill_bytes) for k in module.report.kernels] == [(0, 0)]
