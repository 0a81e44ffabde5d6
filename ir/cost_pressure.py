"""Per-thread pressure physics of the cost model: how a CTA's warps split a tile, what that costs.

The analytic model in `cake.ir.cost` counts work per tile; this module prices what the *distribution* of
that work over a CTA's threads does, which the first H200 run (results/h200-2026-11-30) showed
to dominate the worst schedules:

- **Warp split** (`warp_split`): a backend lays an accumulator-like [R, C] tile over its warps row-first,
  `rows_per_warp` rows per warp (the mma fragment height: 16 for mma.sync and for each warp of a wgmma
  warpgroup); warps left over split the columns. Warps that split the columns make a row reduction cross
  warps (a shared-memory exchange and a barrier, priced as a sync), and warps whose column strips are
  narrower than `cols_per_warp` replicate the work.
- **Registers** (`register_need`): the live state of one thread — the largest mma result (the accumulator
  and the elementwise tile derived from it replace each other element by element) plus every vector,
  divided over the CTA's threads, on top of a base for addresses and indices. Elementwise temporaries on
  loaded tiles stream and do not count.
- **Spills**: registers beyond what a thread may hold live in local memory; each spilled register is stored and
  reloaded every time the accumulator is touched (once per k-step of an mma.sync chain, once per wgmma). Two
  prices, by what is known of the spill:
  - *estimated* (`spill_seconds`): the static live state over the per-thread maximum, a lower bound of what a
    compiler spills; each access is a dependent round trip of `local_memory_latency_cycles` that only the other
    resident CTAs hide. (On the H200, session 1, Triton's 2-warp 128x128 tiles estimated at 37 registers over ran
    40-75x slower than their 4-warp siblings: the compiler spilled far more than the estimate.)
  - *compiled* (`compiled_spill_seconds`): the count ptxas reports, moved by every thread of the CTA through L1
    as far as the resident CTAs' local memory fits what their shared memory leaves of the unified data cache
    (`local_hit_fraction`), through L2 beyond it, at bandwidth. On the H200 (codegen-4 evolve runs)
    warp-specialized kernels spilling 2-36 registers a thread, whose 5-55 KB of local memory fit beside 130-209
    KB of stages, ran 1.29-1.94 ms among unspilled siblings; those spilling 297-435 (0.5-1.5 MB that L1 cannot
    hold) ran 6.7-18.5 ms, in the order of their missed bytes (a latency price ranked the 384-thread ones
    slowest; they were the fastest of the five).
- **Iteration chain** (`chain_seconds`): one loop iteration is a dependent chain (wait for the stage, mma,
  reductions, exchanges); a CTA cannot run its iterations faster than that chain, and only the CTAs
  resident beside it overlap theirs. This is what makes many small tiles (small BN, small BK) slow.
- **Warp issue** (`warp_issue_cycles`): the chain also contains the work itself, as the busiest warp issues
  it: a warp issues one instruction per clock on its SM sub-partition (one CUDA-core op for 32 lanes), and
  its mma instructions at most at its sub-partition's share of the SM's tensor rate. An iteration's work is
  split over the CTA's warps, so a CTA of fewer warps has a longer chain for the same tile — which the
  aggregate throughput terms (every warp of the SM together) cannot see, and which resident CTAs overlap
  like the rest of the chain.
- **Serial loads** (`serial_load_seconds`): a backend that loads a tile into registers as a per-thread loop
  of vectors, each behind its own bounds branch (`serial_load_vector_bytes`), makes each thread wait one
  memory latency per group of vectors its compiled code has in flight (`serial_load_vectors_in_flight`) in turn;
  that too is part of the CTA's chain.
- **Row-per-lane sums**: a row sum a backend issues one row per lane (`row_sum_ops_per_element`) is not spread
  over the CTA: the busiest lane issues its rows whole, one after another, and that is what the chain carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cake.ir.cost_calibration import CostConstants


@dataclass(frozen=True, slots=True)
class WarpSplit:
    rows: int  # warps along the tile's rows
    cols: int  # warps along its columns
    replication: float  # >= 1: how many times each element is computed because warps outnumber the tile

    @property
    def crosses_columns(self) -> bool:
        """A reduction along the columns (axis 1) needs warps to exchange partial results."""
        return self.cols > 1

    @property
    def crosses_rows(self) -> bool:
        return self.rows > 1


def warp_split(shape: tuple[int, ...], warps: int, consts: CostConstants) -> WarpSplit:
    """How `warps` warps cover a 2-D tile (row-first, `rows_per_warp` rows each); 1-D tiles split one way."""
    warps = max(1, warps)
    if len(shape) < 2:
        return WarpSplit(warps, 1, 1.0)
    r, c = shape[-2], shape[-1]
    rows = max(1, min(warps, r // consts.rows_per_warp))
    cols = max(1, warps // rows)
    covered = rows * consts.rows_per_warp * cols * consts.cols_per_warp
    return WarpSplit(rows, cols, max(1.0, covered / max(1, r * c)))


def register_need(acc_bytes: float, vector_bytes: float, threads: int, consts: CostConstants) -> float:
    """32-bit registers one thread needs (not capped by the architecture's maximum)."""
    live = acc_bytes * consts.accumulator_live_copies + vector_bytes
    return consts.register_base_per_thread + live / max(1, threads) / 4.0


def spilled_registers(need: float, max_per_thread: int) -> float:
    return max(0.0, need - max_per_thread)


def spill_seconds(spilled: float, touches_per_iteration: float, tile_iterations: float, resident_ctas: int,
                  clock_hz: float, consts: CostConstants) -> float:
    """Time the busiest SM spends on the local-memory round trips of an estimated spill (a store and a load per
    spilled register per accumulator touch), hidden only by the other resident CTAs. `tile_iterations` is the loop
    iterations of all tiles the busiest SM runs."""
    if spilled <= 0:
        return 0.0
    trips = tile_iterations * spilled * touches_per_iteration * 2.0
    return trips * consts.local_memory_latency_cycles / clock_hz / max(1, resident_ctas)


def local_hit_fraction(spilled: float, threads_per_cta: int, resident_ctas: int, smem_per_cta: int,
                       l1_smem_per_sm: int, smem_reserved_per_cta: int) -> float:
    """The share of spilled-register accesses L1 serves: all of them while the resident CTAs' local memory
    (`spilled` 4-byte registers a thread) fits what their shared memory leaves of the unified data cache, else
    the part that fits (an access pattern that cycles through every spill slot each iteration keeps hitting only
    what stays resident)."""
    footprint = spilled * 4.0 * threads_per_cta * resident_ctas
    if footprint <= 0:
        return 1.0
    l1_left = max(0, l1_smem_per_sm - resident_ctas * (smem_per_cta + smem_reserved_per_cta))
    return min(1.0, l1_left / footprint)


def compiled_spill_seconds(spilled: float, touches_per_iteration: float, tile_iterations: float,
                           threads_per_cta: int, hit_fraction: float, l1_bytes_per_s: float,
                           l2_bytes_per_s: float) -> float:
    """Time the busiest SM spends moving the registers its compiled code spills (a store and a load per spilled
    register per accumulator touch, by every thread of the tile's CTA) through L1 (`hit_fraction` of the bytes,
    `local_hit_fraction`) and L2 (the rest, at the SM's share `l2_bytes_per_s`). `tile_iterations` is the loop
    iterations of all tiles the busiest SM runs."""
    if spilled <= 0:
        return 0.0
    spill_bytes = tile_iterations * threads_per_cta * spilled * touches_per_iteration * 2.0 * 4.0
    return spill_bytes * (hit_fraction / l1_bytes_per_s + (1.0 - hit_fraction) / l2_bytes_per_s)


def warp_issue_cycles(cuda_ops: float, tensor_flops: float, threads: int, tensor_flops_per_clock_per_sm: float,
                      schedulers_per_sm: int) -> float:
    """Clocks one warp spends issuing its share of `cuda_ops` (per-element ops) and `tensor_flops` (at full
    rate, as `Work` counts them) spread evenly over a CTA of `threads` threads: one op per lane per clock, and
    mma at one sub-partition's share of the SM's tensor rate."""
    warps = max(1, threads // 32)
    per_partition = tensor_flops_per_clock_per_sm / max(1, schedulers_per_sm)
    return cuda_ops / max(1, threads) + (tensor_flops / warps / per_partition if per_partition > 0 else 0.0)


def chain_seconds(tile_iterations: float, resident_ctas: int, clock_hz: float, consts: CostConstants,
                  issue_cycles_per_iteration: float = 0.0) -> float:
    """The dependent chain of each loop iteration — its fixed latency plus the busiest warp's issue of the
    iteration's work (`warp_issue_cycles`) — overlapped only across resident CTAs."""
    cycles = consts.iteration_latency_cycles + issue_cycles_per_iteration
    return tile_iterations * cycles / clock_hz / max(1, resident_ctas)


def serial_load_seconds(serial_loads: float, resident_ctas: int, consts: CostConstants) -> float:
    """Memory latencies a thread waits one after another (`serial_loads` over all tiles the busiest SM runs),
    overlapped only across resident CTAs: a CTA waits at its barrier for its slowest thread."""
    return serial_loads * consts.memory_latency_ns * 1e-9 / max(1, resident_ctas)


def mma_touches(family: str, k: int, consts: CostConstants) -> float:
    """How often one mma touches its accumulator registers: per k-step for mma.sync, once for wgmma."""
    if family == "mma_sync":
        return float(math.ceil(k / consts.mma_sync_k_step))
    return 1.0
