"""Op contracts as data: signature with symbolic dims, dtypes, fp64 reference, tolerance model, semantics.

This module is the format only. Workloads define contracts and register them (registry.py); look one up
with `cake.verifier.registry.get_contract`.

A kernel under test is any Python callable taking the op's inputs as torch tensors in signature order
and returning its output (one tensor) or outputs (a tuple, in `outputs` order).

The format carries multi-output ops with optional inputs. The KDA forward, when its workload arrives,
is written as::

    Contract(
        name="kda_forward",
        inputs=(TensorSpec("q", ("B", "T", "H", "K")), TensorSpec("k", ("B", "T", "H", "K")),
                TensorSpec("v", ("B", "T", "H", "V")), TensorSpec("g", ("B", "T", "H", "K")),
                TensorSpec("beta", ("B", "T", "H")),
                TensorSpec("initial_state", ("B", "H", "K", "V"), "float32", optional=True)),
        outputs=(TensorSpec("o", ("B", "T", "H", "V"), "same_as:q", Role.OUT),
                 TensorSpec("final_state", ("B", "H", "K", "V"), "float32", Role.OUT)),
        dims=(DimSpec("B", 1, 8, (1, 2)), DimSpec("T", 17, 1024, (1, 63, 64, 65)), ...),
        reference=naive_recurrent_kda_fp64,   # fla's naive_recurrent_kda semantics, in fp64
        tolerance=ToleranceModel(reduction=lambda d: d["T"] * d["K"], scale=kda_scale),
        ...)

An optional input is passed as None when a case omits it (`Case.omitted`), and the reference receives None
too; outputs are compared one by one, each with its own dtype rule and `OutputCheck`.
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
class TensorSpec:
    """`dtype_rule`: 'float' (the case's dtype), 'int64', 'int32', 'index' (int32 or int64 accepted, outputs
    only), or 'same_as:<input>'. `int_range_dim`: integer values lie in [0, dims[int_range_dim])."""

    name: str
    dims: tuple[str, ...]
    dtype_rule: str = "float"
    role: Role = Role.IN
    optional: bool = False
    int_range_dim: str | None = None


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


def shape_of(spec: TensorSpec, dims: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(dims[d] for d in spec.dims)


def numel(contract: Contract, dims: Mapping[str, int]) -> int:
    return max(math.prod(shape_of(s, dims)) for s in contract.inputs + contract.outputs)


def __getattr__(name: str) -> object:
    # `CONTRACTS`, `get_contract` and `UnknownOpError` lived here before the registry; code written against
    # that spelling keeps importing (lazily: the registry imports this module).
    if name in ("CONTRACTS", "get_contract", "UnknownOpError"):
        from cake.verifier import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
