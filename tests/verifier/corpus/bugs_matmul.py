"""Planted matmul bugs."""

from __future__ import annotations

import torch
from torch import Tensor


def matmul_bf16_inputs(a: Tensor, b: Tensor) -> Tensor:
    # BUG: "fast path" rounds fp32 operands to bf16 before the product (8-bit mantissa): ~1e-3 relative
    # error, inside allclose(1e-2) and far outside an fp32 contract.
    return (a.to(torch.bfloat16).float() @ b.to(torch.bfloat16).float()).to(a.dtype)


def matmul_half_accumulator(a: Tensor, b: Tensor) -> Tensor:
    # BUG: split-K partial products are accumulated in the input dtype (fp16/bf16) instead of fp32.
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
    for k in range(0, a.shape[1], 16):
        acc = acc + (a[:, k:k + 16].float() @ b[k:k + 16].float()).to(a.dtype)
    return acc


def matmul_drops_k_tail(a: Tensor, b: Tensor) -> Tensor:
    # BUG: the K loop runs over whole 32-wide tiles only; the K % 32 tail is dropped.
    k = a.shape[1] - a.shape[1] % 32
    return (a[:, :k].float() @ b[:k].float()).to(a.dtype)
