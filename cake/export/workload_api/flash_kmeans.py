"""k-means on the exported ops: `assign`, `update` and a Lloyd loop `kmeans(x, k, iters)`.

Part of an exported flash_kmeans package (copied as `api.py` by `cake export`): torch only.
"""

from __future__ import annotations

from typing import Any

import torch

from . import namespace, workspace_bytes  # type: ignore[attr-defined]  # the exported package's

__all__ = ["assign", "kmeans", "update"]


def _ops() -> Any:
    return getattr(torch.ops, namespace)


def _workspace(op: str, *inputs: torch.Tensor) -> torch.Tensor | None:
    """A workspace for `op_out` at these inputs (None where the op keeps no scratch)."""
    size = workspace_bytes(op, *inputs)
    return torch.empty(size, dtype=torch.uint8, device=inputs[0].device) if size else None


def assign(x: torch.Tensor, c: torch.Tensor, *, out: torch.Tensor | None = None,
           workspace: torch.Tensor | None = None) -> torch.Tensor:
    """ids[b, n] = argmin_k |x[b, n] - c[b, k]|^2 for x [B, N, D] and c [B, K, D] (int32).

    With `out` (int32 [B, N], contiguous, on x's device, not overlapping x or c) the ids are written there through
    the out-variant `kmeans_assign_out` and `out` is returned; its scratch goes to `workspace` (uint8, at least
    `workspace_bytes("kmeans_assign", x, c)` bytes; allocated here when not given)."""
    if out is None:
        return _ops().kmeans_assign(x, c)  # type: ignore[no-any-return]
    if workspace is None:
        workspace = _workspace("kmeans_assign", x, c)
    _ops().kmeans_assign_out(out, x, c, workspace)
    return out


def update(x: torch.Tensor, ids: torch.Tensor, c_old: torch.Tensor, *, out: torch.Tensor | None = None,
           workspace: torch.Tensor | None = None) -> torch.Tensor:
    """Cluster means [B, K, D] of x under ids; a cluster with no points keeps c_old.

    ids may be int32 (as `assign` returns them) or int64; the op takes int64, so int32 ids are converted (one
    allocation: `kmeans` keeps an int64 buffer instead). With `out` ([B, K, D], x's dtype, contiguous, not
    overlapping an input) the means are written there through `kmeans_update_out` and `out` is returned; its
    scratch goes to `workspace` (bytes: `workspace_bytes("kmeans_update", x, ids64, c_old)`; allocated here when
    not given)."""
    ids = ids.to(torch.int64)
    if out is None:
        return _ops().kmeans_update(x, ids, c_old)  # type: ignore[no-any-return]
    if workspace is None:
        workspace = _workspace("kmeans_update", x, ids, c_old)
    _ops().kmeans_update_out(out, x, ids, c_old, workspace)
    return out


def kmeans(x: torch.Tensor, k: int, iters: int, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's algorithm: `iters` rounds of assign + update from k distinct points per batch chosen with `seed`.

    x is [B, N, D] (or [N, D]); returns (centroids [B, K, D], ids [B, N]) — without the batch dim for 2-D x.
    Every buffer is allocated once, before the loop: the int32 ids, their int64 copy the update reads, two
    centroid buffers the iterations alternate between, and each op's workspace. Every iteration then runs
    through the out-variants (`kmeans_assign_out`, `kmeans_update_out`) and a `copy_` of the ids: no allocation
    per iteration on the CUDA and Triton kernels' paths (the reference fallback computes into a fresh tensor and
    copies it into the buffer). The results equal `assign`/`update` called in the same order.
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
    ops = _ops()
    gen = torch.Generator().manual_seed(seed)
    picks = torch.stack([torch.randperm(n, generator=gen)[:k] for _ in range(b)]).to(xb.device)
    centroids = [torch.gather(xb, 1, picks[:, :, None].expand(b, k, d)).contiguous(),
                 torch.empty((b, k, d), dtype=xb.dtype, device=xb.device)]
    ids = torch.empty((b, n), dtype=torch.int32, device=xb.device)
    ids64 = torch.empty((b, n), dtype=torch.int64, device=xb.device)
    assign_ws = _workspace("kmeans_assign", xb, centroids[0])
    update_ws = _workspace("kmeans_update", xb, ids64, centroids[0]) if iters else None
    ops.kmeans_assign_out(ids, xb, centroids[0], assign_ws)
    for step in range(iters):
        c_old, c_new = centroids[step % 2], centroids[(step + 1) % 2]
        ids64.copy_(ids)
        ops.kmeans_update_out(c_new, xb, ids64, c_old, update_ws)
        ops.kmeans_assign_out(ids, xb, c_new, assign_ws)
    c = centroids[iters % 2]
    return (c, ids) if batched else (c[0], ids[0])
