"""Correct controls for the starter ops: plain torch, sequential fp32 loops, and Triton (controls_triton.py).

What tolerance calibration measures and what tests use as kernels that must pass every gate. Torch
controls compute in fp32 and cast back, as the contracts require; sequential controls feed one fp32
accumulator per output in order, as a plain tiled GPU loop does (cake.verifier.controls.sequential_sum).
"""

from __future__ import annotations

import torch
from cake.experiments.starter.references import RMSNORM_EPS
from cake.verifier.controls import sequential_sum
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


def softmax_sequential(x: Tensor) -> Tensor:
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    total = sequential_sum(lambda j: e[..., j], x.shape[-1], e[..., 0])
    return (e / total[..., None]).to(x.dtype)


def row_sum_sequential(x: Tensor) -> Tensor:
    xf = x.float()
    return sequential_sum(lambda j: xf[:, j], x.shape[1], xf[:, 0] if x.shape[1] else xf.sum(dim=-1)).to(x.dtype)


def rmsnorm_sequential(x: Tensor, w: Tensor) -> Tensor:
    xf = x.float()
    ss = sequential_sum(lambda j: xf[:, j] * xf[:, j], x.shape[1], xf[:, 0])
    return (xf * torch.rsqrt(ss / x.shape[1] + RMSNORM_EPS)[:, None] * w.float()).to(x.dtype)


def matmul_sequential(a: Tensor, b: Tensor) -> Tensor:
    af, bf = a.float(), b.float()
    like = torch.empty(a.shape[0], b.shape[1])
    return sequential_sum(lambda k: af[:, k, None] * bf[None, k, :], a.shape[1], like).to(a.dtype)
