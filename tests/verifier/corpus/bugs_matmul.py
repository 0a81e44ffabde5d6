"""Planted matmul bugs."""

from __future__ import annotations

import torch
from torch import Tensor


def _round_to_tf32(t: Tensor) -> Tensor:
    # Round-to-nearest onto TF32's 10 mantissa bits: what `allow_tf32 = True` does to fp32 operands.
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def matmul_tf32_inputs(a: Tensor, b: Tensor) -> Tensor:
    # BUG: fp32 operands rounded to TF32 (the tensor-core "fast path"): ~1e-4 relative error, inside
    # allclose(1e-2) and far outside the fp32 contract, which names TF32 rounding a violation.
    if a.dtype != torch.float32:
        return (a.float() @ b.float()).to(a.dtype)
    return _round_to_tf32(a) @ _round_to_tf32(b)


def matmul_half_accumulator(a: Tensor, b: Tensor) -> Tensor:
    # BUG: split-K partial products are accumulated in the input dtype (fp16/bf16) instead of fp32.
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
    for k in range(0, a.shape[1], 16):
        acc = acc + (a[:, k:k + 16].float() @ b[k:k + 16].float()).to(a.dtype)
    return acc


def matmul_drops_k_tail(a: Tensor, b: Tensor) -> Tensor:
    # BUG: K <= 32 is one (masked) tile, but the K loop for larger K runs over whole 32-wide tiles only,
    # so the K % 32 tail is dropped.
    k = a.shape[1]
    if k > 32:
        k -= k % 32
    return (a[:, :k].float() @ b[:k].float()).to(a.dtype)
