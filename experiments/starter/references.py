"""fp64 references and output scales for the starter ops (softmax, rmsnorm, row_sum, matmul).

A reference takes the op's inputs in signature order — floats already upcast to float64 on the CPU,
integer tensors as int64, an omitted optional input as None — and returns a tuple with one tensor per
output. These functions are the meaning of the ops; `contracts.py` only binds them to signatures.

A *scale* returns, per output, a non-negative fp64 magnitude broadcastable to that output: the size of
the terms an implementation sums, which is what rounding error is proportional to (see tolerance.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

RMSNORM_EPS = 1e-6  # part of the op's definition (issue 3), not a tolerance


def softmax(x: Tensor) -> tuple[Tensor]:
    return (torch.softmax(x, dim=-1),)


def softmax_scale(x: Tensor) -> tuple[Tensor]:
    # Outputs lie in [0, 1] and each is a quotient by a sum of terms <= 1.
    return (torch.ones_like(x[..., :1]),)


def rmsnorm(x: Tensor, w: Tensor) -> tuple[Tensor]:
    return (x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + RMSNORM_EPS) * w,)


def rmsnorm_scale(x: Tensor, w: Tensor) -> tuple[Tensor]:
    y = rmsnorm(x, w)[0]
    return (y.abs().amax(dim=-1, keepdim=True).nan_to_num(0.0, 0.0, 0.0),)


def row_sum(x: Tensor) -> tuple[Tensor]:
    return (x.sum(dim=-1),)


def row_sum_scale(x: Tensor) -> tuple[Tensor]:
    # A sequential fp32 sum's error is sum_k delta_k * S_k over its partial sums S_k (|delta_k| <= eps/2);
    # for terms t, sqrt(sum_k S_k^2) ~ sqrt(N) * (|t|_2 + |sum t|) / 2: the random-walk part and the drift
    # part. So eps * sqrt(N) * (|t|_2 + |sum t|) holds for a plain tiled loop (one fp32 accumulator per
    # output, as on a GPU); blocked and tree sums (torch on the CPU) err far less.
    xf = x.nan_to_num(0.0, 0.0, 0.0)
    return ((xf * xf).sum(dim=-1).sqrt() + xf.sum(dim=-1).abs(),)


def matmul(a: Tensor, b: Tensor) -> tuple[Tensor]:
    return (a @ b,)


def matmul_scale(a: Tensor, b: Tensor) -> tuple[Tensor]:
    # As row_sum_scale, over the products t_k = a_ik b_kj: |t|_2 + |c_ij|, with |t|_2^2 = (a^2 @ b^2)_ij
    # (one more fp64 GEMM, on the reference's device).
    af, bf = a.nan_to_num(0.0, 0.0, 0.0), b.nan_to_num(0.0, 0.0, 0.0)
    return (((af * af) @ (bf * bf)).sqrt() + (af @ bf).abs(),)
