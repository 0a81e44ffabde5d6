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
