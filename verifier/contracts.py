"""Op contracts as data: signature with symbolic dims, dtypes, fp64 reference, tolerance model, semantics.

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
from cake.verifier import references as ref
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


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


_ROWS = (1, 2, 3, 5, 7, 13, 31, 33)
_COLS = (1, 3, 7, 17, 31, 33, 63, 65, 127, 129, 255, 257)
_EXACT_NAN = "NaN/Inf follow the fp64 reference: non-finite outputs at exactly its positions and signs."

_SOFTMAX = Contract(
    name="softmax",
    inputs=(TensorSpec("x", ("M", "N")),),
    outputs=(TensorSpec("y", ("M", "N"), "same_as:x", Role.OUT),),
    dims=(DimSpec("M", 5, 4096, _ROWS), DimSpec("N", 37, 4096, _COLS + (1000,), long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.softmax,
    tolerance=ToleranceModel(reduction=lambda d: d["N"], scale=ref.softmax_scale),
    semantics=("softmax over the last dim; output dtype = x.dtype", _EXACT_NAN,
               "a row holding +Inf gives NaN (Inf - Inf), as the fp64 reference does"),
    has_backward=False, flops=lambda d: 5.0 * d["M"] * d["N"],
    bytes=lambda d, t: 2.0 * d["M"] * d["N"] * _size(t), reduction_dim="N", output_checks=(OutputCheck.CLOSE,),
)

_RMSNORM = Contract(
    name="rmsnorm",
    inputs=(TensorSpec("x", ("M", "N")), TensorSpec("w", ("N",))),
    outputs=(TensorSpec("y", ("M", "N"), "same_as:x", Role.OUT),),
    dims=(DimSpec("M", 5, 4096, _ROWS), DimSpec("N", 37, 4096, _COLS, long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.rmsnorm,
    tolerance=ToleranceModel(reduction=lambda d: d["N"], scale=ref.rmsnorm_scale),
    semantics=(f"x * rsqrt(mean(x*x, -1) + {ref.RMSNORM_EPS}) * w; output dtype = x.dtype", _EXACT_NAN),
    has_backward=False, flops=lambda d: 4.0 * d["M"] * d["N"],
    bytes=lambda d, t: (2.0 * d["M"] * d["N"] + d["N"]) * _size(t), reduction_dim="N",
    output_checks=(OutputCheck.CLOSE,),
)

_ROW_SUM = Contract(
    name="row_sum",
    inputs=(TensorSpec("x", ("M", "N")),),
    outputs=(TensorSpec("y", ("M",), "same_as:x", Role.OUT),),
    dims=(DimSpec("M", 5, 4096, _ROWS), DimSpec("N", 37, 4096, _COLS, long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.row_sum,
    tolerance=ToleranceModel(reduction=lambda d: d["N"], scale=ref.row_sum_scale),
    semantics=("sum over the last dim; output dtype = x.dtype; fp32 accumulation expected", _EXACT_NAN),
    has_backward=False, flops=lambda d: float(d["M"] * d["N"]),
    bytes=lambda d, t: (d["M"] * d["N"] + d["M"]) * float(_size(t)), reduction_dim="N",
    output_checks=(OutputCheck.CLOSE,),
)

_MATMUL = Contract(
    name="matmul",
    inputs=(TensorSpec("a", ("M", "K")), TensorSpec("b", ("K", "N"))),
    outputs=(TensorSpec("c", ("M", "N"), "same_as:a", Role.OUT),),
    # GPU defaults stay moderate: the fp64 reference runs on the host CPU for every case.
    dims=(DimSpec("M", 9, 1024, _ROWS + (65,)), DimSpec("N", 11, 1024, (1, 3, 17, 33, 65)),
          DimSpec("K", 19, 1024, (1, 3, 17, 31, 33, 65, 129), long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.matmul,
    tolerance=ToleranceModel(reduction=lambda d: d["K"], scale=ref.matmul_scale),
    semantics=("c = a @ b; output dtype = a.dtype; fp32 accumulation", _EXACT_NAN,
               "fp32 inputs are multiplied at fp32 precision: TF32 rounding of fp32 inputs is a violation"),
    has_backward=False, flops=lambda d: 2.0 * d["M"] * d["N"] * d["K"],
    bytes=lambda d, t: (d["M"] * d["K"] + d["K"] * d["N"] + d["M"] * d["N"]) * float(_size(t)),
    reduction_dim="K", output_checks=(OutputCheck.CLOSE,), tensor_core=True,
)

_KMEANS_ASSIGN = Contract(
    name="kmeans_assign",
    inputs=(TensorSpec("x", ("B", "N", "D")), TensorSpec("c", ("B", "K", "D"))),
    outputs=(TensorSpec("ids", ("B", "N"), "index", Role.OUT),),
    # GPU defaults are a verification shape, not the benchmark cell: the fp64 reference costs B*N*K*D on
    # the host for each case (the CAKE cell would be 2.7e11 multiply-adds per case).
    dims=(DimSpec("B", 2, 2, (1, 3)), DimSpec("N", 23, 4096, (1, 7, 31, 65, 129)),
          DimSpec("K", 9, 256, (1, 2, 3, 17, 65)), DimSpec("D", 8, 128, (1, 3, 17, 33), long_value=1031)),
    dtypes=FLOAT_DTYPES, reference=ref.kmeans_assign,
    tolerance=ToleranceModel(reduction=lambda d: d["D"], scale=ref.kmeans_assign_scale),
    semantics=("ids[b, n] = argmin_k |x[b, n] - c[b, k]|^2; ids may be int32 or int64",
               "ties: any index whose fp64 distance is within tolerance of the minimum is accepted",
               "a NaN distance is never the minimum; a point with no finite distance (each one NaN or +Inf, e.g. "
               "a -Inf coordinate) may take any id"),
    has_backward=False, flops=lambda d: 2.0 * d["B"] * d["N"] * d["K"] * d["D"],
    bytes=lambda d, t: d["B"] * (d["N"] * d["D"] + d["K"] * d["D"]) * float(_size(t)) + d["B"] * d["N"] * 4.0,
    reduction_dim="D", output_checks=(OutputCheck.ARGMIN,), scores=ref.kmeans_distances,
    structure=ref.kmeans_assign_structure, tensor_core=True,
)

_KMEANS_UPDATE = Contract(
    name="kmeans_update",
    inputs=(TensorSpec("x", ("B", "N", "D")), TensorSpec("ids", ("B", "N"), "int64", int_range_dim="K"),
            TensorSpec("c_old", ("B", "K", "D"))),
    outputs=(TensorSpec("c_new", ("B", "K", "D"), "same_as:x", Role.OUT),),
    dims=(DimSpec("B", 2, 4, (1, 3)), DimSpec("N", 29, 16384, (1, 7, 31, 65, 129), long_value=4099),
          DimSpec("K", 7, 256, (1, 2, 3, 17, 65)), DimSpec("D", 8, 128, (1, 3, 17, 33))),
    dtypes=FLOAT_DTYPES, reference=ref.kmeans_update,
    tolerance=ToleranceModel(reduction=lambda d: d["N"], scale=ref.kmeans_update_scale),
    semantics=("c_new[b, k] = mean of x[b, n] over n with ids[b, n] == k; fp32 accumulation; dtype = x.dtype",
               "a cluster with no points keeps c_old[b, k]", _EXACT_NAN),
    has_backward=False, flops=lambda d: 2.0 * d["B"] * d["N"] * d["D"],
    bytes=lambda d, t: d["B"] * (d["N"] * d["D"] + 2 * d["K"] * d["D"]) * float(_size(t)) + d["B"] * d["N"] * 8.0,
    reduction_dim="N", output_checks=(OutputCheck.CLOSE,), structure=ref.kmeans_update_structure,
)

CONTRACTS: dict[str, Contract] = {
    c.name: c for c in (_SOFTMAX, _RMSNORM, _ROW_SUM, _MATMUL, _KMEANS_ASSIGN, _KMEANS_UPDATE)
}


class UnknownOpError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def get_contract(name: str) -> Contract:
    """The contract named `name`, or an error listing the known ops."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise UnknownOpError(f"unknown op `{name}`; known ops: {', '.join(sorted(CONTRACTS))}") from None


def dim_size(name: str, dims: Mapping[str, int]) -> int:
    """dims[name], or dims[X] + c for a dim written `X+c` (segment offsets have `N+1` entries)."""
    base, plus, extra = name.partition("+")
    return dims[base] + (int(extra) if plus else 0)


def shape_of(spec: TensorSpec, dims: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(dim_size(d, dims) for d in spec.dims)


def numel(contract: Contract, dims: Mapping[str, int]) -> int:
    return max(math.prod(shape_of(s, dims)) for s in contract.inputs + contract.outputs)

# Workload contracts, until the workload registry (issue 13) replaces this table: imported last, since they are
# built from the classes above.
from cake.experiments.kda.contract import CONTRACTS as _KDA  # noqa: E402

CONTRACTS.update((c.name, c) for c in _KDA)
