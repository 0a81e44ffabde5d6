"""Planted rmsnorm bugs."""

from __future__ import annotations

import torch
from torch import Tensor


def rmsnorm_wrong_eps(x: Tensor, w: Tensor) -> Tensor:
    # BUG: eps = 1e-5 (a common default) instead of the contract's 1e-6; invisible unless mean(x^2) is tiny.
    x32 = x.float()
    y = x32 * torch.rsqrt((x32 * x32).mean(dim=-1, keepdim=True) + 1e-5) * w.float()
    return y.to(x.dtype)


def rmsnorm_mutates_input(x: Tensor, w: Tensor) -> Tensor:
    # BUG: normalizes in place to save memory, destroying the caller's x.
    rms = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    x.mul_(rms.to(x.dtype))
    return x * w


def rmsnorm_assumes_contiguous(x: Tensor, w: Tensor) -> Tensor:
    # BUG: reinterprets storage as row-major [M, N]; a transposed or sliced x reads the wrong elements.
    m, n = x.shape
    flat = torch.as_strided(x, (m, n), (n, 1))
    x32 = flat.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def rmsnorm_square_in_input_dtype(x: Tensor, w: Tensor) -> Tensor:
    # BUG: the sum of squares is kept in x.dtype; in fp16 it overflows to inf once it passes 65504
    # (a row of 37 values of 100 is enough), so large rows come out as zeros.
    ms = (x * x).sum(dim=-1, keepdim=True).float() / x.shape[-1]
    return (x.float() * torch.rsqrt(ms + 1e-6) * w.float()).to(x.dtype)


def rmsnorm_mean_over_block(x: Tensor, w: Tensor) -> Tensor:
    # BUG: rows wider than one 64-wide tile take a looping path that divides the sum of squares by the
    # padded width (tiles * 64) instead of N; exact for N <= 64 and for multiples of 64.
    n = x.shape[-1]
    block = n if n <= 64 else -(-n // 64) * 64
    x32 = x.float()
    return (x32 * torch.rsqrt((x32 * x32).sum(dim=-1, keepdim=True) / block + 1e-6) * w.float()).to(x.dtype)
