"""The hardware facts CAKE relies on, defined once.

Two tables: `ARCHS` holds what an ISA target guarantees (limits and instructions the checker enforces);
`DEVICES` holds what a product delivers (SM count, rates, bandwidth) for the cost model and rooflines.
Units live in field names. Each number names its source; a `measured_*` field is our own measurement.

Sources (short names used below):
  [ccg]   CUDA C++ Programming Guide, "Compute Capabilities" tables (technical specifications per CC).
  [ptx]   PTX ISA 8.x/9.x: wgmma requires sm_90a, tcgen05 requires sm_100a, setmaxnreg sm_90a,
          cp.async.bulk.tensor (TMA) sm_90, cp.async sm_80, mbarrier expect_tx sm_90.
  [a100]  NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB).
  [h100]  NVIDIA H100 Tensor Core GPU datasheet (SXM5), dense (no sparsity) figures.
  [h200]  NVIDIA H200 Tensor Core GPU datasheet (SXM); compute identical to H100 SXM.
  [b200]  NVIDIA Blackwell (HGX B200) datasheet, dense figures per GPU.
  [cake]  Measured by us on the lent H200, 2026-11-30 (DESIGN.md "Measured on an H200").
  [kinds] Read on the lent H200 machine via torch.cuda.get_device_properties, 2026-10-28 (KINDS.md).

The mma forms (`MmaForm`, one row per instruction shape) are the single source for the legality checks,
the agents' form choices and the CUDA backend, which generates one wrapper per form it calls from the row.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cache


class Feature(enum.Enum):
    """Instructions and mechanisms whose availability differs between targets."""

    MMA_SYNC = "mma.sync"  # warp-level mma, sm_80+
    LDMATRIX = "ldmatrix"
    CP_ASYNC = "cp.async"  # per-thread async global->shared copies, sm_80+
    MBARRIER = "mbarrier"  # shared-memory barriers with arrival counts, sm_80+
    MBARRIER_TX = "mbarrier.expect_tx"  # transaction-count barriers, sm_90+
    TMA = "cp.async.bulk.tensor"  # tensor-map bulk copies, sm_90+
    WGMMA = "wgmma"  # warpgroup mma, sm_90a only
    SETMAXNREG = "setmaxnreg"  # per-warpgroup register reallocation, sm_90a only
    TCGEN05 = "tcgen05"  # 5th-gen tensor cores with TMEM accumulators, sm_100a only
    TMEM = "tmem"
    # thread-block clusters: CTAs co-scheduled on one GPC, each able to reach the others' shared memory and
    # mbarriers (mapa, remote arrive), and TMA multicast of one box into every CTA of the cluster, sm_90+ [ptx]
    CLUSTER = "cluster"


# Facts common to every target CAKE knows.
THREADS_PER_WARP = 32  # [ccg]
WARPS_PER_WARPGROUP = 4  # wgmma and setmaxnreg act on 4 consecutive warps, warpgroup-aligned [ptx]
SMEM_BANKS = 32  # shared memory: 32 banks of 4 bytes, one 4-byte word per bank per wavefront [ccg]
SMEM_BANK_BYTES = 4
# The widest per-thread shared access (ld.shared.v4.b32). A warp's 16-byte loads return 512 B, at most 128 B (one
# word per bank) per wavefront: 4 wavefronts at least, and exactly 4 when every 8 consecutive lanes' requests cover
# the 32 banks once: then each bank serves the warp 4 words, so 4 wavefronts whether the hardware serves a warp by
# quarter-warps or by its busiest bank (NVIDIA does not publish which).
SMEM_VECTOR_BYTES = 16


class MmaFamily(enum.Enum):
    """Tensor-core instruction families, as the IR spells them (`via wgmma.m64n128k16`)."""

    MMA_SYNC = "mma_sync"  # warp-level, synchronous
    WGMMA = "wgmma"  # warpgroup-level, asynchronous, operands through shared-memory descriptors
    TCGEN05 = "tcgen05"  # issued by one thread, accumulator in tensor memory


class OperandMemory(enum.Enum):
    """Where a schedule may hand an mma operand."""

    REGISTERS = "registers"
    SHARED = "shared memory"
    TENSOR = "tensor memory"


class Issuer(enum.Enum):
    """Who issues one instruction (and owns its accumulator fragment)."""

    WARP = "warp"
    WARPGROUP = "warpgroup"
    THREAD = "thread"


@dataclass(frozen=True, slots=True)
class MmaForm:
    """One tensor-core instruction shape: D[m, n] (+)= A[m, k] @ B[k, n].

    A row lists only the variants CAKE emits (16-bit operands, fp32 accumulator, operands K-major); the ISA
    has more (tf32, fp8, A from tensor memory for tcgen05). wgmma takes A from registers too: a schedule binds the
    stage with `let xa: T[M, K] = xs[w]` before the loop and the CUDA backend loads it once (ldmatrix). Adding one is a row
    here plus what its emitter needs in the backend. The CUDA backend generates the wrapper of a form from
    its row, so every form a target lists compiles for that target.
    """

    family: MmaFamily
    m: int
    n: int
    k: int
    instruction: str  # the PTX opcode before its shape and type suffixes
    operand_dtypes: tuple[str, ...]  # element types A and B may have (the IR's spelling: f16, bf16)
    accumulator_dtype: str
    a_memory: frozenset[OperandMemory]  # SHARED for mma.sync: the backend loads fragments with ldmatrix
    b_memory: frozenset[OperandMemory]
    issuer: Issuer
    feature: Feature

    @property
    def name(self) -> str:
        """The form as a schedule writes it after `via`."""
        return f"{self.family.value}.m{self.m}n{self.n}k{self.k}"

    @property
    def shape(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"


_HALF_TYPES = ("f16", "bf16")
_REGS_OR_SHARED = frozenset({OperandMemory.REGISTERS, OperandMemory.SHARED})
_SHARED = frozenset({OperandMemory.SHARED})
MMA_SYNC_FORMS: tuple[MmaForm, ...] = (
    MmaForm(MmaFamily.MMA_SYNC, 16, 8, 16, "mma.sync.aligned", _HALF_TYPES, "f32", _REGS_OR_SHARED,
            _REGS_OR_SHARED, Issuer.WARP, Feature.MMA_SYNC),
)
# [ptx] wgmma .m64nNk16 with f16/bf16 inputs: N = 8..256 in steps of 8.
WGMMA_FORMS: tuple[MmaForm, ...] = tuple(
    MmaForm(MmaFamily.WGMMA, 64, n, 16, "wgmma.mma_async.sync.aligned", _HALF_TYPES, "f32", _REGS_OR_SHARED, _SHARED,
            Issuer.WARPGROUP, Feature.WGMMA)
    for n in range(8, 257, 8))
# Registers one wgmma needs live beside its accumulator fragment (m x n f32 over the warpgroup's 128 threads): its
# descriptors, addresses and loop state. ptxas cannot spill inside the instruction, so a launch whose register cap is
# under fragment + this does not compile. [cake: ptxas 13.0.88 for sm_90a refused a wgmma.m64n128k16 (a 64-register
# fragment) with C7602 "Insufficient registers ... register target of 90" under caps of 64, 72 and 80 registers a
# thread and compiled it under 96, 128 and 168; it asked for 154 for a wgmma.m64n256k16 (128) under 128 and compiled
# it under 168; with the A operand held in registers (32 of them) beside a 64-register fragment it compiled under 96
# (session 28's probe, scripts/probe_wgmma_registers.py)]
WGMMA_ISSUE_REGISTERS = 26
# [ptx] tcgen05.mma cta_group::1 kind::f16 with M = 128: N = 16..256 in steps of 16. (M = 64 puts the
# accumulator in other TMEM lanes than row = lane, which CAKE's tensor-memory loads assume: not listed.)
TCGEN05_FORMS: tuple[MmaForm, ...] = tuple(
    MmaForm(MmaFamily.TCGEN05, 128, n, 16, "tcgen05.mma.cta_group::1.kind::f16", _HALF_TYPES, "f32", _SHARED,
            _SHARED, Issuer.THREAD, Feature.TCGEN05)
    for n in range(16, 257, 16))


@dataclass(frozen=True, slots=True)
class ArchSpec:
    """Limits of one compilation target (what the static checker proves against)."""

    name: str  # the target as nvcc spells it: sm_80, sm_90a, sm_100a
    compute_capability: tuple[int, int]
    smem_per_block_max_bytes: int  # opt-in maximum dynamic shared memory per block [ccg]
    smem_per_sm_bytes: int  # [ccg]
    smem_reserved_per_block_bytes: int  # system use per block [ccg]
    # The SM's unified data cache: shared memory and L1 are carved from it, so what shared memory leaves is the L1
    # that holds local memory (register spills) [ccg: the unified data cache size per compute capability]
    l1_smem_per_sm_bytes: int
    registers_per_sm: int  # 32-bit registers [ccg]
    registers_per_thread_max: int  # [ccg]
    register_allocation_granularity: int  # registers per thread allocated in multiples of this (setmaxnreg: 8)
    threads_per_block_max: int  # [ccg]
    warps_per_sm_max: int  # [ccg]
    blocks_per_sm_max: int  # [ccg]
    named_barriers_per_block: int  # bar.sync ids 0..15 [ptx]
    tmem_columns: int  # 0 where the target has no tensor memory; 512 x 128 lanes x 32 bit on sm_100a [ptx]
    tma_box_dim_max_elements: int  # each boxDim <= 256 [CUDA driver API cuTensorMapEncodeTiled]
    tma_alignment_bytes: int  # global address and strides 16-byte aligned [driver API]
    features: frozenset[Feature]
    mma_forms: tuple[MmaForm, ...]  # the tensor-core instruction shapes the target has
    source: str
    # setmaxnreg takes a per-thread count in this range, in steps of register_allocation_granularity [ptx]
    setmaxnreg_min_registers: int = 24
    setmaxnreg_max_registers: int = 256
    # SM sub-partitions, each with one warp scheduler issuing one warp instruction per clock (sm_80, sm_90 and
    # sm_100 alike) [ccg: the compute-capability tables, and the architecture whitepapers' SM diagrams]
    warp_schedulers_per_sm: int = 4
    # CTAs one cluster may hold without opting in to non-portable sizes (cudaFuncAttributeNonPortableClusterSize
    # allows 16 on H100) [ccg: thread block clusters]; 1 where the target has no clusters
    cluster_ctas_max: int = 1

    def has(self, feature: Feature) -> bool:
        return feature in self.features

    def mma_form(self, name: str) -> MmaForm | None:
        """The row of the form spelled `name` (e.g. `wgmma.m64n96k16`), None where the target lacks it."""
        return next((f for f in self.mma_forms if f.name == name), None)

    def mma_widths(self, family: MmaFamily, m: int | None = None) -> tuple[int, ...]:
        """The N the target offers for `family` (and M, when given), ascending."""
        return tuple(sorted({f.n for f in self.mma_forms if f.family is family and (m is None or f.m == m)}))

    @property
    def max_named_barrier_id(self) -> int:
        """bar.sync ids run 0..named_barriers_per_block - 1; id 0 is __syncthreads'."""
        return self.named_barriers_per_block - 1

    @property
    def setmaxnreg_values(self) -> tuple[int, ...]:
        """Every per-thread register count setmaxnreg accepts (empty without setmaxnreg)."""
        if Feature.SETMAXNREG not in self.features:
            return ()
        step = self.register_allocation_granularity
        return tuple(range(self.setmaxnreg_min_registers, self.setmaxnreg_max_registers + 1, step))


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """Throughput of one product, for rooflines and the cost model. Rates are dense (no sparsity)."""

    name: str
    arch: str  # default target in ARCHS
    sm_count: int
    boost_clock_mhz: int
    tensor_tflops: dict[str, float]  # per input dtype: bf16, fp16, tf32, fp8
    cuda_core_fp32_tflops: float
    hbm_bytes_per_s: float
    l2_bytes: int
    hbm_bytes: int
    measured_gemm_bf16_tflops: float | None  # torch bf16 GEMM 8192^3 median [cake]
    measured_copy_bytes_per_s: float | None  # device-to-device copy, read + write [cake]
    source: str

    @property
    def gemm_ceiling_tflops(self) -> float:
        """The tensor-core ceiling to judge against: measured when we have it, else the datasheet."""
        return self.measured_gemm_bf16_tflops or self.tensor_tflops["bf16"]

    @property
    def bandwidth_ceiling_bytes_per_s(self) -> float:
        return self.measured_copy_bytes_per_s or self.hbm_bytes_per_s


_AMPERE = frozenset({Feature.MMA_SYNC, Feature.LDMATRIX, Feature.CP_ASYNC, Feature.MBARRIER})
_HOPPER = _AMPERE | {Feature.MBARRIER_TX, Feature.TMA, Feature.CLUSTER}
_HOPPER_A = _HOPPER | {Feature.WGMMA, Feature.SETMAXNREG}
_BLACKWELL_A = _HOPPER | {Feature.TCGEN05, Feature.TMEM, Feature.SETMAXNREG}

ARCHS: dict[str, ArchSpec] = {
    "sm_80": ArchSpec(
        name="sm_80", compute_capability=(8, 0),
        smem_per_block_max_bytes=163 * 1024, smem_per_sm_bytes=164 * 1024, smem_reserved_per_block_bytes=1024,
        l1_smem_per_sm_bytes=192 * 1024,
        registers_per_sm=65536, registers_per_thread_max=255, register_allocation_granularity=8,
        threads_per_block_max=1024, warps_per_sm_max=64, blocks_per_sm_max=32,
        named_barriers_per_block=16, tmem_columns=0, tma_box_dim_max_elements=256, tma_alignment_bytes=16,
        features=_AMPERE, mma_forms=MMA_SYNC_FORMS, source="[ccg] CC 8.0; [ptx]",
    ),
    "sm_90": ArchSpec(
        name="sm_90", compute_capability=(9, 0),
        smem_per_block_max_bytes=227 * 1024, smem_per_sm_bytes=228 * 1024, smem_reserved_per_block_bytes=1024,
        l1_smem_per_sm_bytes=256 * 1024,
        registers_per_sm=65536, registers_per_thread_max=255, register_allocation_granularity=8,
        threads_per_block_max=1024, warps_per_sm_max=64, blocks_per_sm_max=32,
        named_barriers_per_block=16, tmem_columns=0, tma_box_dim_max_elements=256, tma_alignment_bytes=16,
        features=_HOPPER, mma_forms=MMA_SYNC_FORMS, cluster_ctas_max=8,
        source="[ccg] CC 9.0; [ptx] (no arch-specific wgmma/setmaxnreg without the 'a')",
    ),
    "sm_90a": ArchSpec(
        name="sm_90a", compute_capability=(9, 0),
        smem_per_block_max_bytes=227 * 1024, smem_per_sm_bytes=228 * 1024, smem_reserved_per_block_bytes=1024,
        l1_smem_per_sm_bytes=256 * 1024,
        registers_per_sm=65536, registers_per_thread_max=255, register_allocation_granularity=8,
        threads_per_block_max=1024, warps_per_sm_max=64, blocks_per_sm_max=32,
        named_barriers_per_block=16, tmem_columns=0, tma_box_dim_max_elements=256, tma_alignment_bytes=16,
        features=_HOPPER_A, mma_forms=MMA_SYNC_FORMS + WGMMA_FORMS, cluster_ctas_max=8,
        source="[ccg] CC 9.0; [ptx] sm_90a",
    ),
    "sm_100a": ArchSpec(
        name="sm_100a", compute_capability=(10, 0),
        smem_per_block_max_bytes=227 * 1024, smem_per_sm_bytes=228 * 1024, smem_reserved_per_block_bytes=1024,
        l1_smem_per_sm_bytes=256 * 1024,
        registers_per_sm=65536, registers_per_thread_max=255, register_allocation_granularity=8,
        threads_per_block_max=1024, warps_per_sm_max=64, blocks_per_sm_max=32,
        named_barriers_per_block=16, tmem_columns=512, tma_box_dim_max_elements=256, tma_alignment_bytes=16,
        features=_BLACKWELL_A, mma_forms=MMA_SYNC_FORMS + TCGEN05_FORMS, cluster_ctas_max=8,
        source="[ccg] CC 10.0; [ptx] sm_100a tcgen05, TMEM 512 columns",
    ),
}

DEVICES: dict[str, DeviceSpec] = {
    "A100-SXM4-80GB": DeviceSpec(
        name="A100-SXM4-80GB", arch="sm_80", sm_count=108, boost_clock_mhz=1410,
        tensor_tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0},
        cuda_core_fp32_tflops=19.5, hbm_bytes_per_s=2.039e12, l2_bytes=40 * 1024**2, hbm_bytes=80 * 1000**3,
        measured_gemm_bf16_tflops=None, measured_copy_bytes_per_s=None, source="[a100]",
    ),
    "H100-SXM5": DeviceSpec(
        name="H100-SXM5", arch="sm_90a", sm_count=132, boost_clock_mhz=1980,
        tensor_tflops={"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp8": 1978.9},
        cuda_core_fp32_tflops=66.9, hbm_bytes_per_s=3.35e12, l2_bytes=50 * 1024**2, hbm_bytes=80 * 1000**3,
        measured_gemm_bf16_tflops=None, measured_copy_bytes_per_s=None, source="[h100]",
    ),
    "H200": DeviceSpec(
        name="H200", arch="sm_90a", sm_count=132, boost_clock_mhz=1980,
        tensor_tflops={"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp8": 1978.9},
        cuda_core_fp32_tflops=66.9, hbm_bytes_per_s=4.8e12, l2_bytes=60 * 1000**2, hbm_bytes=141 * 1000**3,
        measured_gemm_bf16_tflops=723.0, measured_copy_bytes_per_s=4.25e12,
        source="[h200] rates; [kinds] SM count and L2; [cake] measured ceilings",
    ),
    "B200": DeviceSpec(
        name="B200", arch="sm_100a", sm_count=148, boost_clock_mhz=1965,
        tensor_tflops={"bf16": 2250.0, "fp16": 2250.0, "tf32": 1100.0, "fp8": 4500.0},
        cuda_core_fp32_tflops=80.0, hbm_bytes_per_s=8.0e12, l2_bytes=126 * 1024**2, hbm_bytes=180 * 1000**3,
        measured_gemm_bf16_tflops=None, measured_copy_bytes_per_s=None, source="[b200]",
    ),
}

# The device each target is ranked for when the user names only an arch.
DEFAULT_DEVICE_FOR_ARCH: dict[str, str] = {
    "sm_80": "A100-SXM4-80GB", "sm_90": "H200", "sm_90a": "H200", "sm_100a": "B200",
}


class UnknownArchError(ValueError):
    pass


def arch(name: str) -> ArchSpec:
    """The target named `name`, or an error listing the known ones."""
    try:
        return ARCHS[name]
    except KeyError:
        known = ", ".join(ARCHS)
        raise UnknownArchError(f"unknown arch `{name}`; known targets: {known}") from None


MMA_SYNC_WARP_BLOCK = 16  # rows and columns each warp of an mma.sync tile owns, in whole blocks


def mma_sync_warp_grid(rows: int, cols: int, warps: int) -> tuple[int, int] | None:
    """How `warps` warps split a rows x cols mma.sync accumulator: (warps along rows, warps along columns),
    every warp owning whole 16 x 16 blocks, as many warps along the rows as fit (a row reduction then stays
    inside one warp); None when no split exists. The CUDA backend lays fragments out by it and the checker
    (E0614) refuses a tile it cannot split, so both read this one rule."""
    block = MMA_SYNC_WARP_BLOCK
    return next(((wm, warps // wm) for wm in range(warps, 0, -1) if warps % wm == 0
                 and rows % (block * wm) == 0 and cols % (block * (warps // wm)) == 0), None)


@cache
def mma_forms_of(family: MmaFamily) -> tuple[MmaForm, ...]:
    """Every form of `family` that some target lists (the shapes the ISA defines, as far as CAKE emits)."""
    seen: dict[str, MmaForm] = {}
    for spec in ARCHS.values():
        for form in spec.mma_forms:
            if form.family is family:
                seen.setdefault(form.name, form)
    return tuple(seen.values())


def match_device(name: str) -> DeviceSpec | None:
    """The device whose name a CUDA device name contains ('NVIDIA H200' -> H200, 'NVIDIA H100 80GB HBM3' ->
    H100-SXM5), or None when none does."""
    key = name.upper().replace(" ", "")
    for spec in sorted(DEVICES.values(), key=lambda d: -len(d.name)):
        if spec.name.split("-")[0].upper() in key:
            return spec
    return None


def device_for(arch_name: str) -> DeviceSpec:
    return DEVICES[DEFAULT_DEVICE_FOR_ARCH[arch(arch_name).name]]


def ranking_device(arch_name: str, gpu_name: str | None) -> tuple[DeviceSpec, str]:
    """The device a search ranks its candidates for, and why: the GPU that times them (`gpu_name`, the CUDA
    device name) when `cake.arch` knows it; else the arch's default device (a CPU run predicts for it, and an
    unknown GPU has no rates to price with). Session 27 ranked an H100 run with the H200's model (rho 0.915 over
    its 18 timings); the H100's own calibration is the one fitted to what that GPU measured."""
    default = device_for(arch_name)
    if gpu_name is None:
        return default, f"no GPU in this process: {arch_name}'s default device"
    present = match_device(gpu_name)
    if present is None:
        return default, (f"the GPU present ({gpu_name}) is not a device cake.arch lists: {arch_name}'s default "
                         f"device; add it to DEVICES to rank for it")
    return present, f"the GPU present ({gpu_name})"
