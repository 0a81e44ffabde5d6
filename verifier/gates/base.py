"""What every gate shares: the context it judges in, the registry, and case-plan helpers.

A gate is data plus two functions: `plan(ctx, dtype)` lists the cases it runs for one dtype (a pure
function of the seed, so a replay token's case index names the same case again), and `check(ctx, case)`
runs the kernel on that case and returns an outcome. Gates that need no kernel run (RES-02) set `static`.

A check never handles `cake.errors.ShapeNotSupported` itself: `call_kernel` turns it into a refused case, which
`run_gate_in` records (`GateResult.refused_cases`, `refusals`) instead of judging; a gate with every case
refused is SKIP, and CMP-01 must judge a case of each dtype for the verdict to pass (see results.py).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from cake.verifier.compare import compare
from cake.verifier.contracts import Contract, numel
from cake.verifier.expected import expected_for_case
from cake.verifier.inputs import Case, Layout, ValueFamily, generator, make_case, materialize
from cake.verifier.results import GateResult, GateStatus
from cake.verifier.runner import CaseOutcome, call_kernel
from cake.verifier.sampling import take_rows, wrong_output_shape
from torch import Tensor

# Largest tensor a generated CPU case may hold: keeps a battery on an interpreted Triton kernel in seconds.
CPU_MAX_ELEMENTS = 1 << 16
BF16_INTERPRETER_SKIP = ("bf16 under the Triton CPU interpreter is computed as raw 16-bit integers (garbage): "
                         "bf16 is verified on the GPU")


class DtypePolicy(enum.Enum):
    ALL = "all"  # every requested dtype
    PRIMARY = "primary"  # the first requested dtype: the property does not depend on precision
    FP16 = "fp16"  # only fp16, when requested (PRC-02)


@dataclass(frozen=True, slots=True)
class ResourceReport:
    """What the compiler says a kernel uses (the lowering's ptxas report)."""

    arch: str
    registers_per_thread: int | None = None
    smem_bytes: int | None = None
    tmem_columns: int | None = None
    spill_bytes: int | None = None

    @staticmethod
    def from_mapping(data: Mapping[str, object]) -> ResourceReport:
        def opt(key: str) -> int | None:
            value = data.get(key)
            return None if value is None else int(value)  # type: ignore[call-overload]
        return ResourceReport(str(data["arch"]), opt("registers_per_thread"), opt("smem_bytes"),
                              opt("tmem_columns"), opt("spill_bytes"))


class DimsProfile(enum.Enum):
    """Which default shapes a battery uses. Normally the device's own; profiling the GPU-size battery on
    the CPU (scripts/bench_verifier.py --dims gpu) picks GPU on the CPU. Replay tokens name the device
    only, so a battery run under another device's profile is for measurement, not for replay."""

    SMALL = "small"  # DimSpec.default_small, cases capped at CPU_MAX_ELEMENTS
    GPU = "gpu"  # DimSpec.default_gpu, uncapped

    @staticmethod
    def for_device(device: str) -> DimsProfile:
        return DimsProfile.SMALL if device == "cpu" else DimsProfile.GPU


@dataclass(frozen=True, slots=True)
class GateContext:
    contract: Contract
    kernel: Callable[..., object]
    device: str
    dtypes: tuple[torch.dtype, ...]
    seed: int
    interpreter: bool = False  # a Triton kernel under TRITON_INTERPRET=1: bf16 cases are skipped
    resource_report: ResourceReport | None = None
    dims_profile: DimsProfile | None = None  # None: the device's own (SMALL on cpu, GPU elsewhere)

    @property
    def profile(self) -> DimsProfile:
        return self.dims_profile or DimsProfile.for_device(self.device)

    def default_dims(self) -> dict[str, int]:
        return self.contract.default_dims("cpu" if self.profile is DimsProfile.SMALL else "cuda")

    def skips_dtype(self, dtype: torch.dtype) -> bool:
        return self.interpreter and self.device == "cpu" and dtype == torch.bfloat16


def always(ctx: GateContext) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Gate:
    gate_id: str
    title: str
    plan: Callable[[GateContext, torch.dtype], list[Case]]
    check: Callable[[GateContext, Case], CaseOutcome]
    dtype_policy: DtypePolicy = DtypePolicy.ALL
    applies: Callable[[GateContext], str | None] = always  # a reason to SKIP, or None
    static: Callable[[GateContext], GateResult] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def dtypes(self, ctx: GateContext) -> tuple[torch.dtype, ...]:
        if self.dtype_policy is DtypePolicy.PRIMARY:
            return ctx.dtypes[:1]
        if self.dtype_policy is DtypePolicy.FP16:
            return tuple(d for d in ctx.dtypes if d == torch.float16)
        return ctx.dtypes


GATES: dict[str, Gate] = {}


def register(gate: Gate) -> Gate:
    assert gate.gate_id not in GATES, f"gate {gate.gate_id} registered twice"
    GATES[gate.gate_id] = gate
    return gate


def get_gate(gate_id: str) -> Gate:
    try:
        return GATES[gate_id]
    except KeyError:
        raise KeyError(f"unknown gate `{gate_id}`; known gates: {', '.join(GATES)}") from None


# ---- plan helpers ----------------------------------------------------------------------------------------

def fits(ctx: GateContext, dims: Mapping[str, int]) -> bool:
    return ctx.profile is DimsProfile.GPU or numel(ctx.contract, dims) <= CPU_MAX_ELEMENTS


def shrink_to_fit(ctx: GateContext, dims: dict[str, int]) -> dict[str, int]:
    """Reset the largest non-default dims to their defaults until the case fits the CPU budget."""
    defaults = ctx.default_dims()
    while not fits(ctx, dims):
        name = max((n for n in dims if dims[n] > defaults[n]), key=lambda n: dims[n], default=None)
        if name is None:
            break
        dims[name] = defaults[name]
    return dims


def boundary_dims(ctx: GateContext, gate_id: str, index: int) -> dict[str, int]:
    """Every dim drawn from its boundary candidates (seeded), then shrunk to the CPU budget."""
    gen = generator(ctx.seed, gate_id, index, salt=":dims")
    dims = {d.name: d.boundary_candidates[int(torch.randint(0, len(d.boundary_candidates), (1,), generator=gen))]
            for d in ctx.contract.dims}
    return shrink_to_fit(ctx, dims)


def cases(ctx: GateContext, gate_id: str, dtype: torch.dtype,
          specs: list[tuple[Mapping[str, int], ValueFamily, Layout]]) -> list[Case]:
    """One case per spec; optional inputs are omitted by the contract's pattern for the case index, and the
    dims are resolved for what is present (Contract.resolve_dims)."""
    contract = ctx.contract
    out = []
    for i, (dims, fam, lay) in enumerate(specs):
        omitted = contract.omission_pattern(i)
        out.append(make_case(contract.resolve_dims(dims, omitted), dtype, fam, lay, ctx.seed, gate_id, i, omitted))
    return out


# ---- check helpers ---------------------------------------------------------------------------------------

def run_once(ctx: GateContext, case: Case) -> tuple[tuple[Tensor | None, ...], tuple[Tensor, ...]]:
    inputs = materialize(ctx.contract, case, ctx.device)
    return inputs, call_kernel(ctx.kernel, inputs, len(ctx.contract.outputs))


def check_against_reference(ctx: GateContext, case: Case, nonfinite_only: bool = False,
                            worst_case: bool = False) -> CaseOutcome:
    inputs, outputs = run_once(ctx, case)
    expected = expected_for_case(ctx.contract, case, ctx.device, worst_case)
    if expected.rows is not None:  # a sampled case: full shapes first, then the sampled rows only
        assert ctx.contract.row_dim is not None
        if (wrong := wrong_output_shape(ctx.contract, case, outputs)) is not None:
            return CaseOutcome(GateStatus.FAIL, f"{case.describe()}: {wrong}")
        outputs = tuple(t for t in take_rows(ctx.contract.outputs, outputs, ctx.contract.row_dim, expected.rows)
                        if t is not None)
    result = compare(ctx.contract, case, inputs, outputs, nonfinite_only=nonfinite_only, worst_case=worst_case,
                     expected=expected)
    if result.ok:
        return CaseOutcome(GateStatus.PASS, result.reason)
    return CaseOutcome(GateStatus.FAIL, f"{case.describe()}: {result.reason}", result.evidence)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
