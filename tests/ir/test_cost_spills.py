"""How the cost model prices register spills the compiler reported (`predict(spilled_regs=...)`): their bytes through
L1 while the CTAs' local memory fits what shared memory leaves of the unified data cache, through L2 beyond it. On the
H200 warp-specialized kernels that spilled a few dozen registers ran among their unspilled siblings and those that
spilled hundreds ran 5-14x slower (`cake.ir.cost_pressure`); the earlier price, a latency round trip per access, had the
small spills at 10 ms for a kernel that ran in 1.3.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.ir import cost_pressure as cp
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors
from cake.ir.parser import parse

from cake.arch import arch

FK = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}  # the cell the evolve runs timed


def _main(spilled: float | None):  # type: ignore[no-untyped-def]
    kernel = parse((FK / "assign_pingpong.cake").read_text())
    spills = None if spilled is None else {launch.name: spilled for launch in kernel.launches}
    prediction = predict(kernel, dims=CELL, backend="cuda", factors=Factors(), spilled_regs=spills)
    return max(prediction.launches, key=lambda launch: launch.time_s)


@pytest.mark.parametrize(("spilled", "threads", "resident", "smem", "expected"), [
    (0, 384, 1, 130 * 1024, 1.0),  # nothing spilled: nothing misses
    (36, 384, 1, 130 * 1024, 1.0),  # 54 KB of local memory beside 130 KB of stages: all in L1
    (378, 384, 1, 161 * 1024, (256 - 161 - 1) / (378 * 4 * 384 / 1024)),  # 567 KB: the 94 KB left hits
    (10, 128, 2, 128 * 1024, 0.0),  # two CTAs' stages fill the cache: every access misses
])
def test_l1_serves_what_shared_memory_leaves(spilled: float, threads: int, resident: int, smem: int,
                                             expected: float) -> None:
    spec = arch("sm_90a")
    hits = cp.local_hit_fraction(spilled, threads, resident, smem, spec.l1_smem_per_sm_bytes,
                                 spec.smem_reserved_per_block_bytes)
    assert hits == pytest.approx(expected)


def test_a_spill_that_fits_l1_costs_little_and_one_that_overflows_costs_its_misses() -> None:
    unspilled, small, large = _main(0), _main(36), _main(378)
    assert unspilled.terms.spill_s == 0
    assert small.occupancy.spills_compiled and large.occupancy.spills_compiled
    # a few dozen registers in L1: a fraction of the kernel's tensor time, not a multiple of it
    assert 0 < small.terms.spill_s < 0.5 * small.terms.tensor_s
    # hundreds, mostly missing L1: several times the tensor time, and far beyond the bytes' ratio (10.5x) alone
    assert large.terms.spill_s > 5 * large.terms.tensor_s
    assert large.terms.spill_s > 2 * 10.5 * small.terms.spill_s


def test_an_estimated_spill_keeps_its_round_trip_price() -> None:
    """Without the compiler's count a declared register budget prices no spill (the static estimate cannot see what
    `setmaxnreg` does); a plain kernel's estimate over the per-thread maximum keeps the latency price."""
    assert _main(None).terms.spill_s == 0 and not _main(None).occupancy.spills_compiled
    plain = parse((FK / "assign_plain.cake").read_text())
    two_warps = predict(plain, dims={"B": 8, "N": 16384, "K": 1024, "D": 128}, factors=Factors(),
                        params={"BN": 128, "BK": 128, "WARPS": 2, "STAGES": 1}).launches[0]
    assert two_warps.occupancy.spilled_regs > 0 and not two_warps.occupancy.spills_compiled
    assert two_warps.bound.name == "SPILL"
