"""Correct controls for every starter op: plain torch (here) and small Triton kernels (kernels_triton.py).

These are what tolerance calibration measures and what tests use as kernels that must pass every gate.
Torch controls compute in fp32 and cast back, as the contracts require. Triton controls load lazily
(`triton_controls()`) because TRITON_INTERPRET must be set before Triton kernels are defined.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from cake.verifier.references import RMSNORM_EPS
from torch import Tensor


def softmax(x: Tensor) -> Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def row_sum(x: Tensor) -> Tensor:
    return x.float().sum(dim=-1).to(x.dtype)


def rmsnorm(x: Tensor, w: Tensor) -> Tensor:
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + RMSNORM_EPS) * w.float()).to(x.dtype)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    return (a.float() @ b.float()).to(a.dtype)


def kmeans_assign(x: Tensor, c: Tensor) -> Tensor:
    xf, cf = x.float(), c.float()
    dist = (xf * xf).sum(-1)[:, :, None] - 2.0 * (xf @ cf.transpose(1, 2)) + (cf * cf).sum(-1)[:, None, :]
    return dist.nan_to_num(nan=float("inf")).argmin(dim=-1)  # NaN is never the minimum (contract)


def kmeans_update(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    b, n, d = x.shape
    k = c_old.shape[1]
    sums = torch.zeros(b, k, d, device=x.device).scatter_add_(1, ids[:, :, None].expand(b, n, d), x.float())
    counts = torch.zeros(b, k, device=x.device).scatter_add_(1, ids, torch.ones(b, n, device=x.device))
    mean = sums / counts.clamp(min=1)[:, :, None]
    return torch.where(counts[:, :, None] > 0, mean, c_old.float()).to(x.dtype)


TORCH_CONTROLS: dict[str, Callable[..., Tensor]] = {
    "softmax": softmax, "row_sum": row_sum, "rmsnorm": rmsnorm, "matmul": matmul,
    "kmeans_assign": kmeans_assign, "kmeans_update": kmeans_update,
}


def triton_controls() -> dict[str, Callable[..., Tensor]]:
    """The Triton controls; on CPU set TRITON_INTERPRET=1 before the first call."""
    from cake.verifier import kernels_triton

    return dict(kernels_triton.CONTROLS)


# ---- sequential fp32 controls --------------------------------------------------------------------------
# What a plain tiled GPU loop does: one fp32 accumulator per output, fed the reduction's terms in order.
# Torch's CPU reductions are pairwise/blocked and err far less at long N, so calibrating on them alone would
# give a coefficient that a correct split-K or tiled kernel exceeds (the H200 run: fp32 matmul at K=4096).


def _seq_sum(terms: Callable[[int], Tensor], n: int, like: Tensor) -> Tensor:
    acc = torch.zeros_like(like, dtype=torch.float32)
    for j in range(n):
        acc += terms(j)
    return acc


def softmax_sequential(x: Tensor) -> Tensor:
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    total = _seq_sum(lambda j: e[..., j], x.shape[-1], e[..., 0])
    return (e / total[..., None]).to(x.dtype)


def row_sum_sequential(x: Tensor) -> Tensor:
    xf = x.float()
    return _seq_sum(lambda j: xf[:, j], x.shape[1], xf[:, 0] if x.shape[1] else xf.sum(dim=-1)).to(x.dtype)


def rmsnorm_sequential(x: Tensor, w: Tensor) -> Tensor:
    xf = x.float()
    ss = _seq_sum(lambda j: xf[:, j] * xf[:, j], x.shape[1], xf[:, 0])
    return (xf * torch.rsqrt(ss / x.shape[1] + RMSNORM_EPS)[:, None] * w.float()).to(x.dtype)


def matmul_sequential(a: Tensor, b: Tensor) -> Tensor:
    af, bf = a.float(), b.float()
    like = torch.empty(a.shape[0], b.shape[1])
    return _seq_sum(lambda k: af[:, k, None] * bf[None, k, :], a.shape[1], like).to(a.dtype)


def kmeans_assign_sequential(x: Tensor, c: Tensor) -> Tensor:
    xf, cf = x.float(), c.float()
    d = x.shape[-1]
    xx = _seq_sum(lambda j: xf[..., j] * xf[..., j], d, xf[..., 0])
    cc = _seq_sum(lambda j: cf[..., j] * cf[..., j], d, cf[..., 0])
    dot = _seq_sum(lambda j: xf[:, :, None, j] * cf[:, None, :, j], d, torch.empty(x.shape[0], x.shape[1], c.shape[1]))
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


SEQUENTIAL_CONTROLS: dict[str, Callable[..., Tensor]] = {
    "softmax": softmax_sequential, "row_sum": row_sum_sequential, "rmsnorm": rmsnorm_sequential,
    "matmul": matmul_sequential, "kmeans_assign": kmeans_assign_sequential, "kmeans_update": kmeans_update_sequential,
}
