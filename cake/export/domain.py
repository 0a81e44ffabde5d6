"""The shape domain an exported op serves, and its buckets.

The domain is the box from 1 to the largest size each dim takes among the workload's declared shapes
(`OpSpec.gpu_shapes` and its CPU shape); a call outside it falls back to the reference. Each declared GPU
shape is the centre of one bucket; a call goes to the bucket whose centre is nearest in log2 of the dims.
Static dims (compile-time constants of the CUDA backend) are compiled for the values the declared shapes
and the contract's default sizes take, unless the exporter names them (`--static D=64,128`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bucket:
    name: str
    center: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ShapeDomain:
    ranges: tuple[tuple[str, int, int], ...]  # (dim, lo, hi), inclusive
    buckets: tuple[Bucket, ...]
    static_values: tuple[tuple[str, tuple[int, ...]], ...]  # candidate values per dim, for static dims

    def to_json(self) -> dict[str, object]:
        return {d: [lo, hi] for d, lo, hi in self.ranges}

    def values_of(self, dim: str) -> tuple[int, ...]:
        return dict(self.static_values).get(dim, ())


def domain_for(op: str, overrides: Mapping[str, Sequence[int]] | None = None) -> ShapeDomain:
    """The declared domain of `op`: from its workload's shapes, else from the contract's default sizes."""
    from cake.experiments.workload import UnknownWorkloadError, workload_for_op
    from cake.verifier.registry import get_contract

    contract = get_contract(op)
    try:
        spec = workload_for_op(op).op(op)
        shapes = [dict(s.dims) for s in (spec.cpu_shape, *spec.gpu_shapes)]
        buckets = tuple(Bucket(s.name, s.dims) for s in spec.gpu_shapes)
    except UnknownWorkloadError:
        shapes = [{d.name: d.default_gpu for d in contract.dims}, {d.name: d.default_small for d in contract.dims}]
        buckets = (Bucket("default", tuple((d.name, d.default_gpu) for d in contract.dims)),)
    names = [d.name for d in contract.dims]
    ranges = tuple((d, 1, max(s[d] for s in shapes)) for d in names)
    values: dict[str, set[int]] = {d: {s[d] for s in shapes} for d in names}
    for d in contract.dims:
        values[d.name] |= {d.default_small, d.default_gpu}
    for d, chosen in (overrides or {}).items():
        if d not in values:
            raise ValueError(f"`{op}` has no dim {d!r}; dims: {', '.join(names)}")
        values[d] = set(chosen)
    return ShapeDomain(ranges, buckets, tuple((d, tuple(sorted(v))) for d, v in values.items()))
