"""Seeded kda_forward inputs for the chunk-parallel schedules' interpreter tests (chunkpar and chunk64)."""

from __future__ import annotations

import torch

# a raw gate of +60 with exp(A_log) >= 1 saturates the sigmoid: g = -5, the contract's lower bound
SATURATED = 60.0


def kda_inputs(batch: int, total: int, heads: int, dk: int, dv: int, cuts: list[int] | None, *, extreme: bool,
               seed: int = 0) -> tuple[torch.Tensor | None, ...]:
    """q, k, v, raw gate, beta logits, A_log, dt_bias, h0 and cu_seqlens (None unless `cuts`); `extreme` puts every
    gate at -5 on every channel."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, total, heads, d, generator=gen) for d in (dk, dk, dv))
    g = torch.full((batch, total, heads, dk), SATURATED) if extreme else \
        torch.randn(batch, total, heads, dk, generator=gen)
    beta = torch.randn(batch, total, heads, generator=gen)
    a_log = torch.empty(heads).uniform_(1.0, 16.0, generator=gen).log()
    dt_bias = torch.randn(heads, dk, generator=gen)
    count = batch if cuts is None else len(cuts) - 1
    h0 = torch.randn(count, heads, dk, dv, generator=gen)
    cu = None if cuts is None else torch.tensor(cuts, dtype=torch.int64)
    return q, k, v, g, beta, a_log, dt_bias, h0, cu
