"""Op contracts as data: signature with symbolic dims, dtypes, fp64 reference, tolerance model, semantics.

This module is the format only. Workloads define contracts and register them (registry.py); look one up
with `cake.verifier.registry.get_contract`.

A kernel under test is any Python callable taking the op's inputs as torch tensors in signature order
and returning its output (one tensor) or outputs (a tuple, in `outputs` order).

The format carries multi-output ops with optional inputs, per-input value domains (`ValueDomain`: the gates
project every generated value into it) and structured integer inputs (`SegmentOffsets`: varlen `cu_seqlens`).
KDA's contracts (experiments/kda/contract.py) use all three.

An optional input is passed as None when a case omits it (`Case.omitted`; a gate's cases cycle through
every subset, `Contract.omission_pattern`), and the reference receives None too; outputs are compared one by
one, each with its own dtype rule and `OutputCheck`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from cake.verifier.tolerance import ToleranceModel
from torch import Tensor

FLOAT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)


class Role(enum.Enum):
    IN = "in"
    OUT = "out"


class OutputCheck(enum.Enum):
    CLOSE = "close"  # |got - ref| <= tolerance; non-finite values at exactly the reference's positions
    ARGMIN = "argmin"  # an index whose fp64 score is within tolerance of the row minimum (ties accepted)
    EXACT = "exact"


@dataclass(frozen=True, slots=True)
class DimSpec:
    name: str
    default_small: int  # CPU default: small enough for the Triton interpreter
    default_gpu: int
    boundary_candidates: tuple[int, ...]  # 1, primes, non-multiples of 16/32/64/128, thin and long
    long_value: int | None = None  # a long reduction for ORD-01 / PRC-02 when this is the reduction dim
    # A long reduction that a kernel holding the whole reduction on chip still accepts (a head-dim-like D):
    # ORD-01 and PRC-02 judge it beside `long_value`, so a kernel refusing `long_value` is still judged.
    long_on_chip: int | None = None

    def default(self, device: str) -> int:
        return self.default_small if device == "cpu" else self.default_gpu


@dataclass(frozen=True, slots=True)
class ValueDomain:
    """The values an input may take. The gates project every generated value into it (`project`), so a
    kernel is never judged on inputs its op does not define: values outside the domain are not its fault.

    * `low`/`high`: a closed interval. With both ends finite, a generated value x becomes
      low + (high - low) * sigmoid(x + logit_center) — every family (huge, tiny, zero, offset) lands inside,
      the extremes on the ends, and `logit_center` puts typical values where the op's users put them; with
      one end infinite, values are clamped.
    * `unit_norm`: each vector along the last dim is scaled to L2 norm 1 (a zero vector becomes e_0).
    * `finite`: NaN/+-Inf are outside the domain (they become 0 before the interval map).
    """

    low: float = -math.inf
    high: float = math.inf
    logit_center: float = 0.0
    unit_norm: bool = False
    finite: bool = True

    def project(self, x: Tensor) -> Tensor:
        """`x` (fp32, any family's values) mapped into the domain; a pure function of `x`."""
        if self.finite:
            x = x.nan_to_num(0.0, 0.0, 0.0)
        if math.isfinite(self.low) and math.isfinite(self.high):
            x = self.low + (self.high - self.low) * torch.sigmoid(x + self.logit_center)
        elif math.isfinite(self.low) or math.isfinite(self.high):
            x = x.clamp(min=self.low if math.isfinite(self.low) else None,
                        max=self.high if math.isfinite(self.high) else None)
        if self.unit_norm and x.ndim and x.shape[-1]:
            x64 = x.double()
            norm = x64.norm(dim=-1, keepdim=True)
            basis = torch.zeros_like(x64)
            basis[..., 0] = 1.0
            x = torch.where(norm > 0, x64 / norm.clamp_min(1e-300), basis).float()
        return x

    def describe(self) -> str:
        parts = []
        if math.isfinite(self.low) or math.isfinite(self.high):
            parts.append(f"in [{self.low:g}, {self.high:g}]")
        if self.unit_norm:
            parts.append("L2-normalized over the last dim")
        if self.finite:
            parts.append("finite")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class SegmentOffsets:
    """An integer input holding sequence boundaries into a packed dim (varlen batches, `cu_seqlens`):
    `count` + 1 offsets, 0 = c_0 <= c_1 <= ... <= c_count = dims[total]; empty segments are allowed. When the
    input is present the `batch` dim is 1 (segments replace the batch); when it is omitted, `count` equals
    `batch` (one segment per batch row), so tensors sized by `count` (per-sequence states) keep one shape
    rule. The tensor's dims are written `("<count>+1",)`."""

    total: str
    count: str
    batch: str

    def resolve(self, dims: dict[str, int], present: bool) -> None:
        if present:
            dims[self.batch] = 1
        else:
            dims[self.count] = dims[self.batch]

    def values(self, dims: Mapping[str, int], gen: torch.Generator, edges: bool) -> Tensor:
        """Sorted cut points drawn uniformly from [0, total]; `edges` also makes the first and the last
        segment empty (when there are at least three), the structure a state-carrying kernel mishandles."""
        total, count = dims[self.total], dims[self.count]
        cuts = torch.randint(0, total + 1, (max(0, count - 1),), generator=gen).sort().values
        if edges and count >= 3:
            cuts[0], cuts[-1] = 0, total
        return torch.cat([torch.zeros(1, dtype=torch.int64), cuts.long(), torch.tensor([total])])


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """`dtype_rule`: 'float' (the case's dtype), 'float32', 'int64', 'int32', 'index' (int32 or int64
    accepted, outputs only), or 'same_as:<input>'. `int_range_dim`: integer values lie in
    [0, dims[int_range_dim]). `domain`: the values a float input may take (None: any, NaN/Inf included).
    `offsets`: an integer input holding segment boundaries (see SegmentOffsets). A dim written `N+1` is
    dims["N"] + 1."""

    name: str
    dims: tuple[str, ...]
    dtype_rule: str = "float"
    role: Role = Role.IN
    optional: bool = False
    int_range_dim: str | None = None
    domain: ValueDomain | None = None
    offsets: SegmentOffsets | None = None


@dataclass(frozen=True, slots=True)
class Contract:
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    dims: tuple[DimSpec, ...]
    dtypes: tuple[torch.dtype, ...]
    reference: Callable[..., tuple[Tensor, ...]]
    tolerance: ToleranceModel
    semantics: tuple[str, ...]
    has_backward: bool
    flops: Callable[[Mapping[str, int]], float]
    bytes: Callable[[Mapping[str, int], torch.dtype], float]
    reduction_dim: str
    output_checks: tuple[OutputCheck, ...]
    scores: Callable[..., Tensor] | None = None  # ARGMIN outputs: fp64 scores [..., choices]
    structure: Callable[[list[Tensor | None], torch.Generator], None] | None = None  # op-aware inputs
    tensor_core: bool = False  # the roofline floor may use tensor-core rates
    # Extra shapes CMP-01 runs under the GPU profile only (too big for the interpreter), e.g. a persistent
    # grid that gets several tiles per CTA. Each is judged on a sample of `row_dim` (see sampling.py).
    gpu_cases: tuple[tuple[tuple[str, int], ...], ...] = ()
    # Outputs at index i of this dim depend only on inputs at index i (a point, a row): a large case may be
    # judged on a sample of indices, with the fp64 reference computed on that sample only.
    row_dim: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def optional_inputs(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.inputs if s.optional)

    def resolve_dims(self, dims: Mapping[str, int], omitted: tuple[str, ...]) -> dict[str, int]:
        """`dims` with the couplings the signature implies (segment offsets: batch 1 when present, one
        segment per batch row when omitted). Idempotent; every case's dims pass through it."""
        out = dict(dims)
        for spec in self.inputs:
            if spec.offsets is not None:
                spec.offsets.resolve(out, spec.name not in omitted)
        return out

    def omission_pattern(self, case_index: int) -> tuple[str, ...]:
        """Which optional inputs case `case_index` of a gate omits: the cases cycle through every subset,
        all present first, then none, so each gate with two or more cases sees both ends."""
        names = self.optional_inputs
        if not names:
            return ()
        full = (1 << len(names)) - 1
        masks = [0, full, *range(1, full)]  # bit j set: input j omitted
        mask = masks[case_index % len(masks)]
        return tuple(name for j, name in enumerate(names) if (mask >> j) & 1)

    def dim(self, name: str) -> DimSpec:
        for d in self.dims:
            if d.name == name:
                return d
        raise KeyError(f"{self.name} has no dim {name}")

    def default_dims(self, device: str) -> dict[str, int]:
        return {d.name: d.default(device) for d in self.dims}

    def input_dtype(self, spec: TensorSpec, dtype: torch.dtype) -> torch.dtype:
        return _resolve(spec.dtype_rule, dtype, {})

    def output_dtypes(self, inputs: list[Tensor | None], dtype: torch.dtype) -> tuple[torch.dtype, ...]:
        return self.output_dtypes_of([None if t is None else t.dtype for t in inputs], dtype)

    def output_dtypes_of(self, in_dtypes: list[torch.dtype | None], dtype: torch.dtype) -> tuple[torch.dtype, ...]:
        by_name = {s.name: d for s, d in zip(self.inputs, in_dtypes, strict=True) if d is not None}
        return tuple(_resolve(s.dtype_rule, dtype, by_name) for s in self.outputs)

    def accepts_output_dtype(self, spec: TensorSpec, got: torch.dtype, expected: torch.dtype) -> bool:
        if spec.dtype_rule == "index":
            return got in (torch.int32, torch.int64)
        return got == expected


def _resolve(rule: str, dtype: torch.dtype, inputs: Mapping[str, torch.dtype]) -> torch.dtype:
    if rule == "float":
        return dtype
    if rule in ("int64", "index"):
        return torch.int64
    if rule == "int32":
        return torch.int32
    if rule == "float32":
        return torch.float32
    if rule.startswith("same_as:"):
        return inputs.get(rule.removeprefix("same_as:"), dtype)
    raise ValueError(f"unknown dtype rule `{rule}`")


def element_size(dtype: torch.dtype) -> int:
    """Bytes per element, for a contract's `bytes` model."""
    return torch.empty((), dtype=dtype).element_size()


# Shared wording for contracts whose non-finite outputs must follow the reference exactly (EXC-01).
EXACT_NAN = "NaN/Inf follow the fp64 reference: non-finite outputs at exactly its positions and signs."


def dim_size(name: str, dims: Mapping[str, int]) -> int:
    """dims[name], or dims[X] + c for a dim written `X+c` (segment offsets have `N+1` entries)."""
    base, plus, extra = name.partition("+")
    return dims[base] + (int(extra) if plus else 0)


def shape_of(spec: TensorSpec, dims: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(dim_size(d, dims) for d in spec.dims)


def numel(contract: Contract, dims: Mapping[str, int]) -> int:
    return max(math.prod(shape_of(s, dims)) for s in contract.inputs + contract.outputs)


def __getattr__(name: str) -> object:
    # `CONTRACTS`, `get_contract` and `UnknownOpError` lived here before the registry; code written against
    # that spelling keeps importing (lazily: the registry imports this module).
    if name in ("CONTRACTS", "get_contract", "UnknownOpError"):
        from cake.verifier import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
