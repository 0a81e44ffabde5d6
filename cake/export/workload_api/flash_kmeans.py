"""k-means on the exported ops: `assign`, `update` and a Lloyd loop `kmeans(x, k, iters)`.

Part of an exported flash_kmeans package (copied as `api.py` by `cake export`): torch only.
"""

from __future__ import annotations

from typing import Any

import torch

from . import namespace  # type: ignore[attr-defined]  # the exported package's namespace

__all__ = ["assign", "kmeans", "update"]


def _ops() -> Any:
    return getattr(torch.ops, namespace)


def assign(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """ids[b, n] = argmin_k |x[b, n] - c[b, k]|^2 for x [B, N, D] and c [B, K, D] (int32)."""
    return _ops().kmeans_assign(x, c)  # type: ignore[no-any-return]


def update(x: torch.Tensor, ids: torch.Tensor, c_old: torch.Tensor) -> torch.Tensor:
    """Cluster means [B, K, D] of x under ids; a cluster with no points keeps c_old."""
    return _ops().kmeans_update(x, ids.to(torch.int64), c_old)  # type: ignore[no-any-return]


def kmeans(x: torch.Tensor, k: int, iters: int, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's algorithm: `iters` rounds of assign + update from k distinct points per batch chosen with `seed`.

    x is [B, N, D] (or [N, D]); returns (centroids [B, K, D], ids [B, N]) — without the batch dim for 2-D x.
    """
    batched = x.dim() == 3
    xb = x if batched else x.unsqueeze(0)
    if xb.dim() != 3:
        raise ValueError(f"kmeans: x must be [B, N, D] or [N, D], got shape {tuple(x.shape)}")
    b, n, d = xb.shape
    if not 1 <= k <= n:
        raise ValueError(f"kmeans: k = {k} must be in [1, N = {n}]")
    if iters < 0:
        raise ValueError(f"kmeans: iters = {iters} must be >= 0")
    gen = torch.Generator().manual_seed(seed)
    picks = torch.stack([torch.randperm(n, generator=gen)[:k] for _ in range(b)]).to(xb.device)
    c = torch.gather(xb, 1, picks[:, :, None].expand(b, k, d)).contiguous()
    ids = assign(xb, c)
    for _ in range(iters):
        c = update(xb, ids, c)
        ids = assign(xb, c)
    return (c, ids) if batched else (c[0], ids[0])
