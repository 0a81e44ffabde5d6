"""From one launch's work to its time: occupancy, the terms, and how they overlap (`cake.ir.cost` steps 2-4).

`cake.ir.cost` counts what one tile of a launch does (`Work`, exact from the IR); this module prices it on a device:
the CTAs an SM holds (`occupancy`, wave quantization in `quantize`), each term's time at prior rates (`terms`; the
per-thread pressure physics, spills and iteration chains, in `cake.ir.cost_pressure`), and the launch time from the
terms and calibration factors (`combine`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
from cake.ir import analysis as an
from cake.ir import cost_pressure as cp
from cake.ir import nodes as n
from cake.ir.cost_calibration import CostConstants, Factors

from cake.arch import ArchSpec, DeviceSpec, arch

T = TypeVar("T", float, np.ndarray)  # one launch's time, or many launches' at once


class Bound(enum.Enum):
    """What limits a launch: the term with the largest time."""

    TENSOR = "tensor cores"
    CUDA_CORE = "CUDA cores"
    SMEM = "shared memory"
    L2 = "L2 bandwidth"
    HBM = "HBM bandwidth"
    LATENCY = "memory latency"
    SYNC = "synchronization"
    SPILL = "register spills"
    CHAIN = "iteration latency chain"
    LAUNCH = "launch overhead"


class CostError(ValueError):
    """The model cannot price this schedule at this shape (an unbound size, or it does not fit the SM)."""


# ------------------------------------------------------------------------------------------------ work

@dataclass(frozen=True, slots=True)
class Work:
    """What one unit of the grid (one tile) does; launch totals are this times the tile count."""

    tensor_flops: float = 0.0  # at full rate (already divided by the form's rate fraction)
    cuda_ops: float = 0.0
    global_bytes: float = 0.0  # requested from global memory, through L2 (by this CTA or, multicast, its peers)
    store_bytes: float = 0.0
    smem_bytes: float = 0.0
    syncs: float = 0.0
    stage_bytes: float = 0.0  # global bytes one pipeline stage of that loop carries
    stages: int = 1  # software-pipeline depth of the loop moving the most bytes in all (1 = not pipelined)
    tensor_reads: tuple[tuple[str, float, float], ...] = ()  # (tensor, bytes requested per tile, its size)
    iterations: float = 0.0  # innermost-loop iterations per tile (each one a dependent chain)
    acc_touches: float = 1.0  # accumulator register touches per iteration (mma.sync k-steps, 1 for wgmma)
    serial_loads: float = 0.0  # memory latencies one thread waits in turn (a backend's serial tile loads)
    row_sum_ops: float = 0.0  # the part of cuda_ops issued by row sums one row per lane (not spread over the CTA)
    row_sum_lane_ops: float = 0.0  # what the busiest lane issues of those row sums, one row after another
    tf32_flops: float = 0.0  # fp32 operands' products on the tensor cores, at the TF32 rate (already per form)
    # of global_bytes, what a cluster peer fetched from L2 for this tile (a multicast copy's other CTAs' slices): it
    # lands in this CTA's shared memory, so it counts in flight and against latency, but not against L2
    peer_bytes: float = 0.0



@dataclass(frozen=True, slots=True)
class LaunchWork:
    work: Work
    tiles: int
    staged_smem_bytes: int
    acc_bytes: float  # the largest mma result of one CTA, live in registers
    vector_bytes: float  # 1-D register tiles of one CTA



# ------------------------------------------------------------------------------------------- occupancy

@dataclass(frozen=True, slots=True)
class Allocation:
    """What the compiler allocated for one launch's code, in the model's units: registers per thread, registers per
    thread it spilled (spill stores / 4 bytes), and shared memory per CTA (None where its report gives none)."""

    registers_per_thread: int
    spilled_regs: float = 0.0
    smem_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Occupancy:
    smem_bytes_per_cta: int
    regs_per_thread: int
    threads_per_cta: int
    ctas_per_sm: int
    limited_by: str  # smem | registers | threads | blocks
    tiles: int
    persistent: bool
    tiles_on_busiest_sm: int  # wave quantization: ceil over SMs
    resident_ctas: int  # CTAs sharing an SM while the busiest SM works
    # per thread: beyond the architecture's maximum, estimated (0 with declared budgets), or as compiled (`predict`)
    spilled_regs: float = 0.0
    spills_compiled: bool = False  # `spilled_regs` is what the compiler reported, not the static estimate

    @property
    def resident_warps(self) -> int:
        return self.resident_ctas * self.threads_per_cta // an.THREADS_PER_WARP


def occupancy(kernel: n.Kernel, launch: n.Launch, env: an.Env, spec: ArchSpec, device: DeviceSpec,
              consts: CostConstants, lw: LaunchWork, compiled_spills: float | None = None,
              allocation: Allocation | None = None) -> Occupancy:
    """`compiled_spills`: the registers per thread the launch's compiled code spills (`predict`'s `spilled_regs`),
    used where its roles declare register budgets: the static estimate below prices an undeclared allocation
    against the architecture's maximum and has nothing to say about a budget `setmaxnreg` imposes. (Where no
    budget is declared the estimate stays: ptxas also reports spills in the plain `via dot` kernels that ran among
    the fastest of session 11's variants, outside the loop the model prices.)

    `allocation`: what the compiler allocated for a launch with no declared budget (`predict`'s `allocations`), in
    place of the static estimate of registers, spills and shared memory: a compiler that decides its own layouts
    (Triton) allocates what the IR cannot say, e.g. 173 registers for an 8-warp 128x128 tile the estimate puts at
    96, which halves the CTAs an SM holds."""
    threads = an.launch_threads(launch, env)
    smem = an.smem_layout(launch, env).total_bytes + lw.staged_smem_bytes
    budget = an.register_budget(launch, env, spec)
    spilled = 0.0
    spills_compiled = False
    if any(r.declared for r in budget):
        spilled = compiled_spills or 0.0
        spills_compiled = compiled_spills is not None
        regs = max(1, sum(r.total for r in budget) // max(1, threads))
    elif allocation is not None:
        g = spec.register_allocation_granularity  # the hardware allocates a warp's registers in these steps
        regs, spilled = -(-allocation.registers_per_thread // g) * g, allocation.spilled_regs
        spills_compiled = True
        smem = smem if allocation.smem_bytes is None else allocation.smem_bytes
    else:
        need = cp.register_need(lw.acc_bytes, lw.vector_bytes, threads, consts)
        spilled = cp.spilled_registers(need, spec.registers_per_thread_max)
        g = spec.register_allocation_granularity
        regs = min(spec.registers_per_thread_max, int(-(-need // g) * g))
    limits = {
        "blocks": spec.blocks_per_sm_max,
        "threads": spec.warps_per_sm_max * an.THREADS_PER_WARP // max(1, threads),
        "registers": spec.registers_per_sm // max(1, regs * threads),
        "smem": spec.smem_per_sm_bytes // (smem + spec.smem_reserved_per_block_bytes) if smem else spec.blocks_per_sm_max,
    }
    if smem > spec.smem_per_block_max_bytes:
        limits["smem"] = 0
    limited_by = min(limits, key=lambda k: limits[k])
    ctas_per_sm = limits[limited_by]
    if ctas_per_sm < 1:
        raise CostError(f"launch `{launch.name}` does not fit one SM of {spec.name} "
                        f"({smem:,} B shared memory, {regs} registers x {threads} threads)")
    persistent = launch.grid.kind is n.GridKind.PERSISTENT
    busiest, resident = quantize(lw.tiles, ctas_per_sm, device.sm_count, persistent)
    return Occupancy(smem, regs, threads, ctas_per_sm, limited_by, lw.tiles, persistent, busiest, resident,
                     spilled, spills_compiled)


def quantize(tiles: int, ctas_per_sm: int, sms: int, persistent: bool) -> tuple[int, int]:
    """(tiles the busiest SM processes, CTAs resident on it). A tile grid hands CTAs to SMs as they free up;
    a persistent grid of min(tiles, SMs x CTAs/SM) CTAs strides over the tiles. Either way the busiest SM
    ends up with ceil(tiles / SMs) tiles (striding imbalance inside an SM is second order and ignored), so
    quantization is by SM count and more CTAs per SM only add residency."""
    busiest = -(-tiles // sms)
    if persistent:
        busiest = max(busiest, 1)
    return busiest, max(1, min(ctas_per_sm, busiest))


# --------------------------------------------------------------------------------------------- timing

@dataclass(frozen=True, slots=True)
class Terms:
    """Each term's time in seconds at prior rates (factors not applied), and the overlap structure."""

    tensor_s: float
    cuda_s: float
    smem_s: float
    l2_s: float
    hbm_s: float
    latency_s: float
    sync_s: float
    overhead_s: float
    spill_s: float
    chain_s: float
    compute_residual: float  # share of min(tensor, cuda) not hidden
    memory_residual: float  # share of min(compute, memory) not hidden
    tensor_smem_norm: float  # the p of the norm the tensor and shared-memory times combine by (`combine`)


def terms(work: Work, occ: Occupancy, device: DeviceSpec, consts: CostConstants, dtype: str,
          pingpong: bool) -> Terms:
    sms = device.sm_count
    spec = arch(consts.arch)
    clock_hz = device.boost_clock_mhz * 1e6
    busiest = occ.tiles_on_busiest_sm
    warps = occ.resident_warps
    tensor_issue = min(1.0, warps / consts.warps_for_full_tensor_issue)
    cuda_issue = min(1.0, warps / consts.warps_for_full_cuda_issue)
    peak_tensor = device.tensor_tflops.get(dtype, device.tensor_tflops["bf16"]) * 1e12 / sms
    # fp32 operands' TF32 products, in flops at the kernel dtype's rate
    tensor_flops = work.tensor_flops + work.tf32_flops * peak_tensor / (device.tensor_tflops["tf32"] * 1e12 / sms)
    work = replace(work, tensor_flops=tensor_flops, tf32_flops=0.0)
    cuda_rate = device.cuda_core_fp32_tflops * 1e12 / 2.0 / sms  # one op per lane per clock (an FMA is 2 flops)
    smem_rate = consts.smem_bytes_per_clock_per_sm * clock_hz
    hbm_rate = device.bandwidth_ceiling_bytes_per_s
    l2_rate = hbm_rate * consts.l2_to_hbm_bandwidth_ratio
    total_global = (work.global_bytes - work.peer_bytes) * occ.tiles  # what L2 serves
    hbm_bytes = _hbm_bytes(work, occ.tiles, device.l2_bytes) + work.store_bytes * occ.tiles
    in_flight = occ.resident_ctas * work.stages * work.stage_bytes
    latency_rate = in_flight / (consts.memory_latency_ns * 1e-9) if in_flight else float("inf")
    tile_iterations = busiest * work.iterations
    return Terms(
        tensor_s=busiest * work.tensor_flops / (peak_tensor * tensor_issue),
        cuda_s=busiest * work.cuda_ops / (cuda_rate * cuda_issue),
        smem_s=busiest * work.smem_bytes / smem_rate,
        l2_s=(total_global + work.store_bytes * occ.tiles) / l2_rate,
        hbm_s=hbm_bytes / hbm_rate,
        latency_s=busiest * work.global_bytes / latency_rate,
        sync_s=busiest * work.syncs * consts.sync_cycles / clock_hz / occ.resident_ctas,
        overhead_s=consts.launch_overhead_s,
        spill_s=_spill_seconds(occ, work, tile_iterations, clock_hz, consts, spec, smem_rate, l2_rate / sms),
        chain_s=cp.chain_seconds(tile_iterations, occ.resident_ctas, clock_hz, consts,
                                 _issue_per_iteration(work, occ, peak_tensor / clock_hz, spec))
        + cp.serial_load_seconds(busiest * work.serial_loads, occ.resident_ctas, consts),
        compute_residual=min(consts.pingpong_residual, 1.0 / occ.resident_ctas) if pingpong else 1.0 / occ.resident_ctas,
        memory_residual=1.0 / (max(1, work.stages) * occ.resident_ctas),
        tensor_smem_norm=consts.tensor_smem_norm,
    )


def _spill_seconds(occ: Occupancy, work: Work, tile_iterations: float, clock_hz: float, consts: CostConstants,
                   spec: ArchSpec, l1_bytes_per_s: float, l2_bytes_per_s: float) -> float:
    """A compiled spill at its bytes through L1 and L2, an estimated one at its round trips (`cake.ir.cost_pressure`)."""
    if not occ.spills_compiled:
        return cp.spill_seconds(occ.spilled_regs, work.acc_touches, tile_iterations, occ.resident_ctas, clock_hz,
                                consts)
    hits = cp.local_hit_fraction(occ.spilled_regs, occ.threads_per_cta, occ.resident_ctas, occ.smem_bytes_per_cta,
                                 spec.l1_smem_per_sm_bytes, spec.smem_reserved_per_block_bytes)
    return cp.compiled_spill_seconds(occ.spilled_regs, work.acc_touches, tile_iterations, occ.threads_per_cta, hits,
                                     l1_bytes_per_s, l2_bytes_per_s)


def _issue_per_iteration(work: Work, occ: Occupancy, tensor_flops_per_clock: float, spec: ArchSpec) -> float:
    """Clocks the busiest warp spends issuing one innermost iteration's work (0 for a launch without a loop)."""
    if work.iterations <= 0:
        return 0.0
    spread = cp.warp_issue_cycles((work.cuda_ops - work.row_sum_ops) / work.iterations,
                                  work.tensor_flops / work.iterations, occ.threads_per_cta, tensor_flops_per_clock,
                                  spec.warp_schedulers_per_sm)
    return spread + work.row_sum_lane_ops / work.iterations  # a lane's rows, one instruction a clock


def _hbm_bytes(work: Work, tiles: int, l2_bytes: int) -> float:
    """Each tensor's bytes come from HBM once; re-reads hit L2 while the tensor fits in half of it, and miss
    in proportion to how far it overflows (a tensor twice the usable L2 misses half its re-reads)."""
    usable = l2_bytes / 2
    total = 0.0
    for _, per_tile, size in work.tensor_reads:
        requested = per_tile * tiles
        footprint = min(requested, size)
        miss = 0.0 if footprint <= usable else 1.0 - usable / footprint
        total += footprint + (requested - footprint) * miss
    return total


def combine(t: Terms, f: Factors) -> tuple[float, Bound]:
    """The launch time from its terms and calibration factors, and the dominant term."""
    parts = {
        Bound.TENSOR: t.tensor_s * f.tensor, Bound.CUDA_CORE: t.cuda_s * f.cuda, Bound.SMEM: t.smem_s * f.smem,
        Bound.L2: t.l2_s * f.l2, Bound.HBM: t.hbm_s * f.hbm, Bound.LATENCY: t.latency_s * f.latency,
        Bound.SYNC: t.sync_s * f.sync, Bound.LAUNCH: t.overhead_s * f.overhead, Bound.SPILL: t.spill_s * f.spill,
        Bound.CHAIN: t.chain_s * f.chain,
    }
    total = overlapped(parts[Bound.TENSOR], parts[Bound.CUDA_CORE], parts[Bound.SMEM], parts[Bound.L2],
                       parts[Bound.HBM], parts[Bound.LATENCY], parts[Bound.SYNC], parts[Bound.LAUNCH],
                       parts[Bound.SPILL], parts[Bound.CHAIN], norm=t.tensor_smem_norm,
                       compute_residual=t.compute_residual, memory_residual=t.memory_residual, maximum=max,
                       minimum=min)
    return total, max(parts, key=lambda b: parts[b])


def overlapped(tc: T, cu: T, smem: T, l2: T, hbm: T, latency: T, sync: T, launch: T, spill: T, chain: T, *,
               norm: T, compute_residual: T, memory_residual: T, maximum: Callable[[T, T], T],
               minimum: Callable[[T, T], T]) -> T:
    """The overlap rule: a launch's time from its terms' times under factors and its overlap structure (the
    tensor/shared-memory norm, the residual shares: `Terms`). One formula for one launch (floats, `max`/`min`) and
    for many at once (arrays, `np.maximum`/`np.minimum`: `TermsBatch`)."""
    # The tensor cores and shared memory contend for one pipe (an mma's shared operands, TMA's writes, CUDA-core
    # reads): a p-norm, the max where one is far smaller and more than it where both are near their peaks.
    tensor_smem: T = (tc ** norm + smem ** norm) ** (1.0 / norm)
    # The iteration chain is a floor on the compute side (work cannot finish before its dependent chain).
    compute = maximum(maximum(tensor_smem, cu), chain) + minimum(tc, cu) * compute_residual
    memory = maximum(maximum(l2, hbm), latency)
    body = maximum(compute, memory) + minimum(compute, memory) * memory_residual
    # Spill round trips stall the warps that issue them: they add, like barriers.
    return body + sync + spill + launch


# The Terms fields that are times (each `<name>_s`, scaled by the factor of the same name)
TERM_TIMES: tuple[str, ...] = ("tensor", "cuda", "smem", "l2", "hbm", "latency", "sync", "overhead", "spill", "chain")


@dataclass(frozen=True)
class TermsBatch:
    """Many predictions' launch terms as arrays, re-timed under one set of factors at once: what a calibration's
    search does thousands of times (`cake.ir.cost_calibration.fit_factors_to`), by the same rule as `combine`."""

    times: dict[str, np.ndarray]  # term name (Terms field without `_s`) -> each launch's time at prior rates
    compute_residual: np.ndarray
    memory_residual: np.ndarray
    tensor_smem_norm: np.ndarray
    owner: np.ndarray  # each launch's prediction, an index into what `of` was given
    predictions: int

    @staticmethod
    def of(launches: Sequence[Sequence[Terms]]) -> TermsBatch:
        """The batch of each prediction's launches' terms (in order: `totals` answers in that order)."""
        flat = [(i, t) for i, terms_of in enumerate(launches) for t in terms_of]

        def column(name: str) -> np.ndarray:
            return np.array([getattr(t, name) for _, t in flat], dtype=float)

        return TermsBatch({name: column(f"{name}_s") for name in TERM_TIMES}, column("compute_residual"),
                          column("memory_residual"), column("tensor_smem_norm"),
                          np.array([i for i, _ in flat], dtype=np.intp), len(launches))

    def totals(self, f: Factors) -> np.ndarray:
        """Each prediction's time under `f`: its launches' times by the overlap rule, summed."""
        t = self.times
        launch = overlapped(t["tensor"] * f.tensor, t["cuda"] * f.cuda, t["smem"] * f.smem, t["l2"] * f.l2,
                            t["hbm"] * f.hbm, t["latency"] * f.latency, t["sync"] * f.sync,
                            t["overhead"] * f.overhead, t["spill"] * f.spill, t["chain"] * f.chain,
                            norm=self.tensor_smem_norm, compute_residual=self.compute_residual,
                            memory_residual=self.memory_residual, maximum=np.maximum, minimum=np.minimum)
        return np.bincount(self.owner, weights=launch, minlength=self.predictions)
