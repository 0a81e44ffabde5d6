"""The CUDA backend's lazy vector loads in the cost model: a 1-D vector loaded from global memory is re-read at
each element of the elementwise expression that uses it (`lowering/cuda/values.py`, kind Lazy), so the model
prices one load per element there; Triton holds the vector in registers and pays nothing extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors, constants_for
from cake.ir.parser import parse
from cake.lowering.runtime import lower

FK = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
S5 = {"B": 8, "N": 16384, "K": 1024, "D": 128}  # session 5's timing shape
CUDA = constants_for("sm_90a", "cuda")
CUDA_1 = constants_for("sm_90a", "cuda", codegen="1")
TRITON = constants_for("sm_90a", "triton")


def _cuda_ops(schedule: str, params: dict[str, int], backend: str) -> float:
    kernel = parse((FK / f"{schedule}.cake").read_text())
    # CUDA codegen 1: the lazy loads as now, but no row-per-lane ||c||^2 sum (codegen 4, test_cost_rowsum.py), so the
    # difference from Triton's count is the lazy loads alone.
    codegen = "1" if backend == "cuda" else None
    prediction = predict(kernel, dims=S5, params=params, backend=backend, factors=Factors(), codegen=codegen)
    return max(prediction.launches, key=lambda lp: lp.time_s).work.cuda_ops


# (schedule, params, extra CUDA-core ops per tile on the CUDA backend over Triton's count)
LAZY_CASES = [
    # norms read as `csq[None, :] - 2 * dot` over [BN, BK] each of K / BK iterations: BN x K loads per tile.
    ("assign_plain_norms", {"BN": 128, "BK": 64, "STAGES": 2, "WARPS": 8}, 128 * 1024),
    ("assign_plain_norms", {"BN": 256, "BK": 64, "STAGES": 2, "WARPS": 4}, 256 * 1024),
    ("assign_plain_norms", {"BN": 32, "BK": 16, "STAGES": 1, "WARPS": 2}, 32 * 1024),
    # ||c||^2 computed from the register tile: no vector comes from global memory, nothing lazy.
    ("assign_plain", {"BN": 128, "BK": 64, "STAGES": 2, "WARPS": 8}, 0),
    ("assign_plain", {"BN": 256, "BK": 32, "STAGES": 2, "WARPS": 4}, 0),
    # the ping-pong copies its norms into shared memory and reads them into registers once per stage.
    ("assign_pingpong", {"BN": 128, "BK": 128, "STAGES": 4}, 0),
]


@pytest.mark.parametrize(("schedule", "params", "loads"), LAZY_CASES)
def test_a_lazy_vector_costs_one_load_per_element_that_reads_it_on_the_cuda_backend_only(
        schedule: str, params: dict[str, int], loads: int) -> None:
    assert TRITON.lazy_vector_load_ops_per_element == 0
    extra = _cuda_ops(schedule, params, "cuda") - _cuda_ops(schedule, params, "triton")
    assert extra == pytest.approx(loads * CUDA_1.lazy_vector_load_ops_per_element)


def test_the_lazy_load_price_is_what_the_sass_issues_per_element() -> None:
    # Codegen 4: SASS (nvcc 13.0.88, sm_90a) of the k loop, assign_plain_norms against assign_plain at the same
    # params, less the plain loop's row sum: +16.3 (BN=256 BK=64 WARPS=4) and +16.9 (BN=128 BK=64 WARPS=8)
    # instructions per accumulator element: one LDG, ~3 LDC re-reading the strides, ~10 of 64-bit address math,
    # the bounds select.
    assert CUDA.lazy_vector_load_ops_per_element == 16
    # Codegen 1 keeps the earlier PTX reading (an L1 load at a quarter of the lanes' issue rate, 4, plus the bounds
    # select, 1): its unmodelled warp-per-row ||c||^2 sum is what its timings mostly show.
    assert CUDA_1.lazy_vector_load_ops_per_element == 4 + 1


def test_the_cuda_lowering_re_reads_a_loaded_vector_per_accumulator_element() -> None:
    # What the constant stands for, in the generated code: the norms load sits inside the per-register epilogue
    # loop of the distance fragment, not before it.
    kernel = parse((FK / "assign_plain_norms.cake").read_text())
    source = lower(kernel, "cuda", params={"BN": 128, "BK": 64, "WARPS": 4}).source
    epilogue = [line for line in source.splitlines() if "dot[cake_r]" in line and "fmaf" in line]
    assert epilogue and all("args.csq_g[" in line for line in epilogue)
