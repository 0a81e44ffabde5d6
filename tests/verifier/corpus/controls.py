"""Correct torch-level controls: each must pass every gate on the CPU, in every dtype."""

from __future__ import annotations

import torch
from torch import Tensor


def softmax_torch(x: Tensor) -> Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def rmsnorm_torch(x: Tensor, w: Tensor) -> Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def row_sum_torch(x: Tensor) -> Tensor:
    return x.float().sum(dim=-1).to(x.dtype)


def matmul_torch(a: Tensor, b: Tensor) -> Tensor:
    return (a.float() @ b.float()).to(a.dtype)


def kmeans_assign_torch(x: Tensor, c: Tensor) -> Tensor:
    # Direct differences (no norm expansion) in fp32; NaN distances never win, as the contract states.
    d = ((x.float()[:, :, None, :] - c.float()[:, None, :, :]) ** 2).sum(dim=-1)
    return d.nan_to_num(nan=float("inf")).argmin(dim=-1)


def kmeans_update_torch(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    b, n, d = x.shape
    k = c_old.shape[1]
    index = ids.long()[:, :, None].expand(b, n, d)
    sums = torch.zeros(b, k, d, dtype=torch.float32, device=x.device).scatter_add_(1, index, x.float())
    counts = torch.zeros(b, k, dtype=torch.float32, device=x.device).scatter_add_(
        1, ids.long(), torch.ones(b, n, device=x.device))
    mean = (sums / counts.clamp(min=1)[:, :, None]).to(x.dtype)
    return torch.where(counts[:, :, None] > 0, mean, c_old)
