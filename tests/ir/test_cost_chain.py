"""The iteration chain's parts, each on a hand-checked case: warp issue, the CUDA backend's serial tile loads
(and its one unpipelined buffer), and what they do to a whole prediction."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.ir import cost_pressure as cp
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors, constants_for
from cake.ir.parser import parse

from cake.arch import DEVICES, arch

FK = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
PLAIN = parse((FK / "assign_plain.cake").read_text())
S5 = {"B": 8, "N": 16384, "K": 1024, "D": 128}  # session 5's timing shape
CUDA = constants_for("sm_90a", "cuda")
TRITON = constants_for("sm_90a", "triton")
H200 = DEVICES["H200"]


def test_warp_issue_is_one_op_per_lane_per_clock_and_a_partitions_share_of_the_tensor_rate() -> None:
    # 4096 element ops over 128 threads: 32 clocks; 1e6 flops over 4 warps at 4000 flops/clock per SM
    # split over 4 schedulers (1000 each): 250 clocks per warp.
    assert cp.warp_issue_cycles(4096, 0, 128, 4000, 4) == pytest.approx(32)
    assert cp.warp_issue_cycles(0, 1e6, 128, 4000, 4) == pytest.approx(250)
    # Half the warps for the same tile: each warp issues twice as much.
    assert cp.warp_issue_cycles(4096, 1e6, 64, 4000, 4) == pytest.approx(2 * (32 + 250))
    assert arch("sm_90a").warp_schedulers_per_sm == 4


def test_the_chain_adds_issue_to_the_fixed_latency_and_serial_loads_wait_a_latency_each() -> None:
    # 10 iterations x (800 fixed + 200 issue) clocks at 1 GHz, 2 CTAs overlapping: 5 us.
    assert CUDA.iteration_latency_cycles == 800
    assert cp.chain_seconds(10, 2, 1e9, CUDA, 200) == pytest.approx(5e-6)
    assert cp.chain_seconds(10, 2, 1e9, CUDA) == pytest.approx(4e-6)
    # 100 loads one after another at 600 ns, 4 CTAs overlapping: 15 us.
    assert CUDA.memory_latency_ns == 600
    assert cp.serial_load_seconds(100, 4, CUDA) == pytest.approx(1.5e-5)


def test_the_cuda_backend_loads_tiles_serially_per_thread_and_triton_does_not() -> None:
    params = {"BN": 128, "BK": 32, "STAGES": 2, "WARPS": 4}
    cuda = predict(PLAIN, dims=S5, params=params, backend="cuda", factors=Factors()).launches[0]
    # x tile: 128 x 128 bf16 = 2048 16-byte vectors over 128 threads = 16 each, 4 in flight at a time (the SASS
    # of the unrolled loop): 4 latencies; per centroid tile 32 x 128 bf16 = 512 vectors = 4 each: 1 latency,
    # 1024 / 32 = 32 iterations: 4 + 1 x 32 = 36 latencies per thread per tile.
    assert CUDA.serial_load_vector_bytes == 16 and CUDA.serial_load_vectors_in_flight == 4
    assert cuda.work.serial_loads == 36
    triton = predict(PLAIN, dims=S5, params=params, backend="triton", factors=Factors()).launches[0]
    assert TRITON.serial_load_vector_bytes == 0 and triton.work.serial_loads == 0
    # The chain term carries them: 8 tiles on the busiest SM x 144 x 600 ns over the resident CTAs.
    occ = cuda.occupancy
    clock = H200.boost_clock_mhz * 1e6
    serial = occ.tiles_on_busiest_sm * 36 * 600e-9 / occ.resident_ctas
    # The row sum of ||c||^2 is issued one row per lane (codegen 4): its lane's rows join the chain whole, the
    # rest of the work is spread over the CTA.
    work = cuda.work
    assert work.row_sum_ops > 0 and work.row_sum_lane_ops > 0
    issue = cp.warp_issue_cycles((work.cuda_ops - work.row_sum_ops) / 32, work.tensor_flops / 32, 128,
                                 H200.tensor_tflops["bf16"] * 1e12 / H200.sm_count / clock, 4) + \
        work.row_sum_lane_ops / 32
    assert cuda.terms.chain_s == pytest.approx(serial + cp.chain_seconds(
        occ.tiles_on_busiest_sm * cuda.work.iterations, occ.resident_ctas, clock, CUDA, issue), rel=1e-3)


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_stages_buy_latency_hiding_only_where_the_backend_pipelines_register_loads(backend: str) -> None:
    times, smem, stages = [], [], []
    for s in (1, 4):
        lp = predict(PLAIN, dims=S5, params={"BN": 128, "BK": 32, "STAGES": s, "WARPS": 4}, backend=backend,
                     factors=Factors()).launches[0]
        times.append(lp.time_s)
        smem.append(lp.occupancy.smem_bytes_per_cta)
        stages.append(lp.work.stages)
    if backend == "cuda":  # one staging buffer, loaded synchronously: STAGES changes nothing
        assert not CUDA.register_loads_pipelined
        assert stages == [1, 1] and smem[0] == smem[1] == (128 + 32) * 128 * 2 and times[0] == times[1]
    else:  # Triton's pipeliner: STAGES deep, STAGES - 1 buffers of the centroid tile (one at 1 stage)
        assert TRITON.register_loads_pipelined and TRITON.pipelined_load_buffers_below_stages == 1
        assert stages == [1, 4] and smem[1] - smem[0] == 2 * 32 * 128 * 2


def test_fewer_warps_for_the_same_tile_predict_a_longer_chain_on_the_cuda_backend() -> None:
    # Session 5's timings: WARPS=2 was 0.84-2.06x the time of WARPS=4 at the same schedule, BN and BK.
    base = {"BN": 128, "BK": 32, "STAGES": 1}
    two, four = (predict(PLAIN, dims=S5, params={**base, "WARPS": w}, backend="cuda", factors=Factors())
                 for w in (2, 4))
    assert two.launches[0].work.serial_loads == 2 * four.launches[0].work.serial_loads
    assert two.time_s > four.time_s
