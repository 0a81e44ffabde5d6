"""Planted kmeans_assign / kmeans_update bugs."""

from __future__ import annotations

import torch
from torch import Tensor


def assign_nan_wins_argmin(x: Tensor, c: Tensor) -> Tensor:
    # BUG: torch.argmin treats NaN as the minimum; the contract says a NaN distance never wins.
    d = ((x.float()[:, :, None, :] - c.float()[:, None, :, :]) ** 2).sum(dim=-1)
    return d.argmin(dim=-1)


def assign_half_distance_expansion(x: Tensor, c: Tensor) -> Tensor:
    # BUG: |x|^2 - 2 x.c + |c|^2 evaluated in the input dtype: fp16 overflows (|x|^2 > 65504) and
    # cancellation picks the wrong centroid when points sit far from the origin.
    xx = (x * x).sum(dim=-1, keepdim=True)
    cc = (c * c).sum(dim=-1)[:, None, :]
    d = xx - 2 * torch.bmm(x, c.transpose(1, 2)) + cc
    return d.float().nan_to_num(nan=float("inf")).argmin(dim=-1)


def update_empty_cluster_nan(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    # BUG: divides by the count without guarding empty clusters: 0/0 = NaN instead of keeping c_old.
    b, n, d = x.shape
    k = c_old.shape[1]
    sums = torch.zeros(b, k, d, dtype=torch.float32).scatter_add_(1, ids[:, :, None].expand(b, n, d), x.float())
    counts = torch.zeros(b, k, dtype=torch.float32).scatter_add_(1, ids, torch.ones(b, n))
    return (sums / counts[:, :, None]).to(x.dtype)


def update_empty_cluster_zero(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    # BUG: clamps the count to 1, so an empty cluster collapses to the origin instead of keeping c_old.
    b, n, d = x.shape
    k = c_old.shape[1]
    sums = torch.zeros(b, k, d, dtype=torch.float32).scatter_add_(1, ids[:, :, None].expand(b, n, d), x.float())
    counts = torch.zeros(b, k, dtype=torch.float32).scatter_add_(1, ids, torch.ones(b, n))
    return (sums / counts.clamp(min=1)[:, :, None]).to(x.dtype)


def update_half_accumulator(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    # BUG: scatter-adds in x.dtype; fp16 sums of many points round at every step.
    b, n, d = x.shape
    k = c_old.shape[1]
    sums = torch.zeros(b, k, d, dtype=x.dtype).scatter_add_(1, ids[:, :, None].expand(b, n, d), x)
    counts = torch.zeros(b, k, dtype=torch.float32).scatter_add_(1, ids, torch.ones(b, n))
    mean = (sums.float() / counts.clamp(min=1)[:, :, None]).to(x.dtype)
    return torch.where(counts[:, :, None] > 0, mean, c_old)
