"""Row-sampled judging for cases too large to check in full on the host (a persistent grid's many tiles).

A contract with a `row_dim` promises that outputs at index i of that dim depend only on inputs at index i
(a point to assign, a softmax row). A case marked `sampled` is then judged on the indices `sample_rows` picks:
one in every `SAMPLE_BLOCK` consecutive indices (a seeded offset, the same in every block) plus the first
and the last. Every tile of at least `SAMPLE_BLOCK` rows holds a judged row whatever the kernel's tile size,
so a dropped tile, a persistent CTA that skips its refill or a missing tail is caught; the fp64 reference
(and for ARGMIN, the scores) is computed on the sampled rows only, ~1/SAMPLE_BLOCK of the full cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from cake.verifier.contracts import Contract, TensorSpec, shape_of
from cake.verifier.inputs import Case, generator
from torch import Tensor

SAMPLE_BLOCK = 32  # the smallest tile (rows) a kernel may use and still have every tile judged


def sample_rows(case: Case, n: int) -> Tensor:
    """Sorted int64 indices into a dim of size `n`: one per SAMPLE_BLOCK block at a seeded offset, 0 and n-1."""
    if n <= 0:
        return torch.zeros(0, dtype=torch.int64)
    gen = generator(case.seed, case.gate_id, case.case_index, salt=":rows")
    offset = int(torch.randint(0, min(SAMPLE_BLOCK, n), (1,), generator=gen))
    rows = torch.cat([torch.arange(offset, n, SAMPLE_BLOCK), torch.tensor([0, n - 1])])
    return torch.unique(rows)  # sorted


def take_rows(specs: Sequence[TensorSpec], tensors: Sequence[Tensor | None], row_dim: str,
              rows: Tensor) -> list[Tensor | None]:
    """Each tensor whose spec has `row_dim`, restricted to `rows` along it; the others as they are."""
    out: list[Tensor | None] = []
    for spec, t in zip(specs, tensors, strict=True):
        if t is None or row_dim not in spec.dims:
            out.append(t)
        else:
            out.append(t.index_select(spec.dims.index(row_dim), rows.to(t.device)))
    return out


def case_rows(contract: Contract, case: Case) -> Tensor | None:
    """The sampled indices of a sampled case, or None when the case is judged in full."""
    if not case.sampled:
        return None
    assert contract.row_dim is not None, f"{contract.name}: a sampled case needs the contract's row_dim"
    return sample_rows(case, case.dim_map[contract.row_dim])


def wrong_output_shape(contract: Contract, case: Case, outputs: Sequence[Tensor]) -> str | None:
    """Why the outputs do not have the contract's full shapes, before any of them is sampled (else None)."""
    for spec, got in zip(contract.outputs, outputs, strict=True):
        want = shape_of(spec, case.dim_map)
        if tuple(got.shape) != want:
            return f"output `{spec.name}` has shape {tuple(got.shape)}, expected {want}"
    return None
