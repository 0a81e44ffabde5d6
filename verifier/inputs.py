"""Seeded, schema-aware input generation.

Everything a case holds is determined by its seed triple (seed, gate_id, case_index): values are drawn
on the CPU from a `torch.Generator` seeded with a hash of the triple, so the same triple gives the same
bytes on every machine, and only then placed on the target device. Non-contiguous layouts are built on the
target device itself, because `.to('cuda')` of a strided view would make it contiguous; the bytes a layout
hides (padding between strided elements) are filled with NaN so a kernel that ignores strides reads NaN.
"""

from __future__ import annotations

import enum
import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import torch
from cake.verifier.contracts import Contract, TensorSpec, shape_of
from torch import Tensor


class ValueFamily(enum.Enum):
    RANDN = "randn"
    ADVERSARIAL = "adversarial"  # rows of 0, huge, tiny, large offset, mixed scales
    SPECIAL = "special"  # randn with NaN, +Inf, -Inf planted at a few positions
    # SPECIAL, plus -Inf at every float input's first element and NaN at its last: the corners a random
    # placement reaches only under some seeds (e.g. a point whose distances are all NaN or +Inf).
    SPECIAL_CORNERS = "special_corners"
    SUBNORMAL = "subnormal"  # values in the dtype's subnormal range
    CANCELLATION = "cancellation"  # [1, 1e-7, -1, 1e-7] repeated along the reduction dim (ORD-03)
    POSITIVE = "positive"  # |randn| + 1: sums grow, exposing low-precision accumulators
    STRUCTURED = "structured"  # op-aware: the contract's structure hook (empty clusters, near-ties)


class Layout(enum.Enum):
    CONTIGUOUS = "contiguous"
    TRANSPOSED = "transposed"  # storage of the last two dims swapped, viewed back to the logical shape
    SLICED = "sliced"  # a window into a larger buffer (row pitch > row length)
    STRIDED = "strided"  # every other element along the last dim


# Magnitudes for ADVERSARIAL inputs. fp16 cannot hold 1e6, and its products must stay below 65504.
_LARGE = {torch.float32: 1e6, torch.bfloat16: 1e6, torch.float16: 1e2}
_OFFSET = 1e3  # softmax without max-subtraction overflows exp() at this offset in every dtype
_SMALL = 1e-6
_CANCEL = (1.0, 1e-7, -1.0, 1e-7)  # the paper's adversarial summation order
_PAD = float("nan")


@dataclass(frozen=True, slots=True)
class Case:
    """One generated input set. `dims` is a sorted tuple of (name, size) so cases are hashable."""

    dims: tuple[tuple[str, int], ...]
    dtype: torch.dtype
    family: ValueFamily
    layout: Layout
    seed: int
    gate_id: str
    case_index: int
    omitted: tuple[str, ...] = field(default_factory=tuple)  # optional inputs passed as None
    sampled: bool = False  # judged on a sample of the contract's row_dim (sampling.py), not in full

    @property
    def dim_map(self) -> dict[str, int]:
        return dict(self.dims)

    def with_dims(self, dims: Mapping[str, int]) -> Case:
        return replace(self, dims=tuple(sorted(dims.items())))

    def describe(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.dims)
        sampled = " (sampled rows)" if self.sampled else ""
        return f"{self.family.value} {self.layout.value} {str(self.dtype).removeprefix('torch.')} [{shape}]{sampled}"


def make_case(dims: Mapping[str, int], dtype: torch.dtype, family: ValueFamily, layout: Layout,
              seed: int, gate_id: str, case_index: int, omitted: tuple[str, ...] = ()) -> Case:
    return Case(tuple(sorted(dims.items())), dtype, family, layout, seed, gate_id, case_index, omitted)


def case_seed(seed: int, gate_id: str, case_index: int) -> int:
    digest = hashlib.sha256(f"cake-inputs:{seed}:{gate_id}:{case_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def generator(seed: int, gate_id: str, case_index: int, salt: str = "") -> torch.Generator:
    return torch.Generator().manual_seed(case_seed(seed, gate_id + salt, case_index))


# Generated values of the last few cases: a gate materializes a case's inputs and then judges it from the same
# values (expected.py); POISON, ALIAS and REUSE materialize it again. Drawing a GPU-size case costs ~0.1-0.2 s
# of host time per draw, a copy a few ms. Callers get copies, so a kernel writing its inputs changes no entry.
HOST_CACHE_ENTRIES = 4
_HOST_CACHE: OrderedDict[tuple[str, Case], list[Tensor | None]] = OrderedDict()


def host_values(contract: Contract, case: Case) -> list[Tensor | None]:
    """The case's logical input values on the CPU, contiguous: the bytes that replay must reproduce."""
    key = (contract.name, replace(case, layout=Layout.CONTIGUOUS, sampled=False))
    hit = _HOST_CACHE.get(key)
    if hit is None:
        hit = _draw(contract, case)
        _HOST_CACHE[key] = hit
        if len(_HOST_CACHE) > HOST_CACHE_ENTRIES:
            _HOST_CACHE.popitem(last=False)
    else:
        _HOST_CACHE.move_to_end(key)
    return [None if v is None else v.clone() for v in hit]


def clear_host_cache() -> None:
    _HOST_CACHE.clear()


def _draw(contract: Contract, case: Case) -> list[Tensor | None]:
    gen = generator(case.seed, case.gate_id, case.case_index)
    dims = contract.resolve_dims(case.dim_map, case.omitted)
    values: list[Tensor | None] = []
    first_float = True
    for spec in contract.inputs:
        if spec.name in case.omitted:
            values.append(None)
            continue
        dtype = contract.input_dtype(spec, case.dtype)
        shape = shape_of(spec, dims)
        if spec.offsets is not None:
            edges = case.family in (ValueFamily.ADVERSARIAL, ValueFamily.STRUCTURED)
            values.append(spec.offsets.values(dims, gen, edges).to(dtype))
            continue
        if not dtype.is_floating_point:
            high = dims[spec.int_range_dim] if spec.int_range_dim else 2**15
            values.append(torch.randint(0, max(1, high), shape, generator=gen, dtype=dtype))
            continue
        x = _floats(contract, spec, shape, case, gen, first_float)
        if spec.domain is not None:
            x = spec.domain.project(x)  # the gates never feed values the op does not define
        values.append(x.to(dtype))
        first_float = False
    if case.family is ValueFamily.STRUCTURED and contract.structure is not None:
        contract.structure(values, gen)
    return values


def _floats(contract: Contract, spec: TensorSpec, shape: tuple[int, ...], case: Case,
            gen: torch.Generator, first: bool) -> Tensor:
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    family = case.family
    if family is ValueFamily.ADVERSARIAL and x.ndim >= 1 and x.numel():
        x = _adversarial(x, case.dtype, gen)
    elif family in (ValueFamily.SPECIAL, ValueFamily.SPECIAL_CORNERS) and x.numel():
        flat = x.view(-1)
        picks = torch.randperm(flat.numel(), generator=gen)[:3]
        for pick, value in zip(picks.tolist(), (float("nan"), float("inf"), float("-inf")), strict=False):
            flat[pick] = value
        if family is ValueFamily.SPECIAL_CORNERS:
            flat[-1] = float("nan")
            flat[0] = float("-inf")
    elif family is ValueFamily.SUBNORMAL:
        info = torch.finfo(case.dtype)
        x = x.clamp(-4, 4) * (info.smallest_normal / 8)
    elif family is ValueFamily.CANCELLATION:
        if first and contract.reduction_dim in spec.dims:
            axis = spec.dims.index(contract.reduction_dim)
            pattern = torch.tensor(_CANCEL).repeat(shape[axis] // 4 + 1)[: shape[axis]]
            view = [1] * len(shape)
            view[axis] = shape[axis]
            x = pattern.view(view).expand(shape).clone()
        else:
            x = torch.ones(shape)
    elif family is ValueFamily.POSITIVE:
        x = x.abs() + 1.0
    return x


_MIXED_REGIME = 4


def _adversarial(x: Tensor, dtype: torch.dtype, gen: torch.Generator) -> Tensor:
    """Each leading-index slice gets one regime: zeros, huge, tiny, offset, mixed scales, or plain randn.
    A 1-D tensor (a weight, one slice) takes the mixed regime: a single regime for all of it would make it
    all zeros exactly when the other inputs are huge, hiding every overflow behind a zero weight."""
    large = _LARGE[dtype] if dtype in _LARGE else _LARGE[torch.float32]
    rows = x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x.reshape(1, -1)
    regime = torch.randint(0, 6, (rows.shape[0],), generator=gen)
    regime[: min(5, rows.shape[0])] = torch.arange(min(5, rows.shape[0]))  # each regime shows up early
    if x.ndim == 1:
        regime[:] = _MIXED_REGIME
    mixed = torch.where(torch.rand(rows.shape, generator=gen) < 0.5, large, _SMALL)
    scale = torch.stack([torch.zeros(()), torch.tensor(large), torch.tensor(_SMALL), torch.ones(()),
                         torch.ones(()), torch.ones(())])[regime][:, None]
    out = rows * scale
    out = torch.where((regime == 3)[:, None], rows + _OFFSET, out)
    out = torch.where((regime == _MIXED_REGIME)[:, None], rows * mixed, out)
    return out.reshape(x.shape)


def place(value: Tensor, layout: Layout, device: str) -> Tensor:
    """Put `value` on `device` with `layout`, building any view on the device so it stays strided."""
    if layout is Layout.CONTIGUOUS or value.ndim == 0 or value.numel() == 0:
        return value.to(device).contiguous()
    if layout is Layout.TRANSPOSED and value.ndim >= 2:
        return value.transpose(-1, -2).to(device).contiguous().transpose(-1, -2)
    if value.ndim < 1:
        return value.to(device)
    n = value.shape[-1]
    pad = _PAD if value.dtype.is_floating_point else -1
    if layout is Layout.SLICED:
        big = torch.full((*value.shape[:-1], n + 3), pad, dtype=value.dtype, device=device)
        view = big[..., 1 : n + 1]
    else:  # STRIDED, and TRANSPOSED of a 1-D tensor
        big = torch.full((*value.shape[:-1], 2 * n), pad, dtype=value.dtype, device=device)
        view = big[..., ::2]
    view.copy_(value.to(device))
    return view


def materialize(contract: Contract, case: Case, device: str = "cpu") -> tuple[Tensor | None, ...]:
    """The case's inputs on `device`, in signature order (None for an omitted optional input)."""
    return tuple(None if v is None else place(v, case.layout, device) for v in host_values(contract, case))


InputSignature = tuple[tuple[tuple[int, ...], torch.dtype] | None, ...]


def input_signature(contract: Contract, case: Case) -> InputSignature:
    """Each input's (shape, dtype) as `materialize` gives it (None: omitted), without drawing a value: what a
    kernel that specializes per call (static dims, dtypes) is compiled for."""
    dims = contract.resolve_dims(case.dim_map, case.omitted)
    return tuple(None if spec.name in case.omitted else (shape_of(spec, dims), contract.input_dtype(spec, case.dtype))
                 for spec in contract.inputs)
