"""Correct controls for kmeans assign and update: plain torch, sequential fp32 loops, and Triton
(controls_triton.py). What tolerance calibration measures and what tests use as kernels that pass every gate.
"""

from __future__ import annotations

import torch
from cake.verifier.controls import sequential_sum
from torch import Tensor


def kmeans_assign(x: Tensor, c: Tensor) -> Tensor:
    xf, cf = x.float(), c.float()
    dist = (xf * xf).sum(-1)[:, :, None] - 2.0 * (xf @ cf.transpose(1, 2)) + (cf * cf).sum(-1)[:, None, :]
    return dist.nan_to_num(nan=float("inf")).argmin(dim=-1)  # NaN is never the minimum (contract)


def kmeans_update(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    # index_put_ with accumulate, not scatter_add_/index_add_: on a GPU those add with fp32 atomics
    # (red.add.f32), which flush subnormal sums to 0 — what EXC-02 rejects, so the control would fail its
    # own contract (the H200 calibration of 2026-12-01 turned that flush into a coefficient of 50,899).
    # CUDA's accumulating index_put_ sorts the ids and sums each cluster in one fp32 accumulator; the CPU's
    # adds in point order. Both keep subnormals, and NaN/Inf stay in their own cluster.
    b, n, d = x.shape
    k = c_old.shape[1]
    where = (torch.arange(b, device=x.device)[:, None].expand(b, n), ids.long())
    sums = torch.zeros(b, k, d, device=x.device).index_put_(where, x.float(), accumulate=True)
    counts = torch.zeros(b, k, device=x.device).index_put_(where, torch.ones(b, n, device=x.device), accumulate=True)
    mean = sums / counts.clamp(min=1)[:, :, None]
    return torch.where(counts[:, :, None] > 0, mean, c_old.float()).to(x.dtype)


def kmeans_assign_sequential(x: Tensor, c: Tensor) -> Tensor:
    xf, cf = x.float(), c.float()
    d = x.shape[-1]
    xx = sequential_sum(lambda j: xf[..., j] * xf[..., j], d, xf[..., 0])
    cc = sequential_sum(lambda j: cf[..., j] * cf[..., j], d, cf[..., 0])
    dot = sequential_sum(lambda j: xf[:, :, None, j] * cf[:, None, :, j], d, torch.empty(x.shape[0], x.shape[1], c.shape[1]))
    dist = xx[:, :, None] - 2.0 * dot + cc[:, None, :]
    return dist.nan_to_num(nan=float("inf")).argmin(dim=-1)


def kmeans_update_sequential(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    b, n, d = x.shape
    k = c_old.shape[1]
    xf = x.float()
    sums = torch.zeros(b, k, d)
    counts = torch.zeros(b, k)
    rows = torch.arange(b)
    for j in range(n):  # points in order, one fp32 running sum per cluster (an atomic-free scatter)
        sums[rows, ids[:, j]] += xf[:, j]
        counts[rows, ids[:, j]] += 1.0
    mean = sums / counts.clamp(min=1)[:, :, None]
    return torch.where(counts[:, :, None] > 0, mean, c_old.float()).to(x.dtype)
