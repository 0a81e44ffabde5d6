"""Correct Triton controls for the starter ops, written plainly so they run under TRITON_INTERPRET=1.

Import this module only after TRITON_INTERPRET is set (on CPU): `triton.jit` decides at decoration time
whether a function is interpreted. `controls.py` imports it lazily for that reason. Every kernel
takes strides, so non-contiguous inputs are read correctly, and accumulates in fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

RMSNORM_EPS: tl.constexpr = tl.constexpr(1e-6)  # the op's definition (references.RMSNORM_EPS)


def _block(n: int) -> int:
    return max(16, triton.next_power_of_2(max(1, n)))


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n, sxm, sxn, sym, syn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x - m), 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * sym + cols * syn, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: Tensor) -> Tensor:
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                   BLOCK=_block(x.shape[1]))
    return y


@triton.jit
def _row_sum_kernel(x_ptr, y_ptr, n, sxm, sxn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * sxm + cols * sxn, mask=cols < n, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def row_sum(x: Tensor) -> Tensor:
    y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    _row_sum_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), x.stride(1), BLOCK=min(_block(x.shape[1]), 256))
    return y


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, sxm, sxn, sw, sym, syn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols * sw, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + RMSNORM_EPS)
    tl.store(y_ptr + row * sym + cols * syn, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: Tensor, w: Tensor) -> Tensor:
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _rmsnorm_kernel[(x.shape[0],)](x, w, y, x.shape[1], x.stride(0), x.stride(1), w.stride(0), y.stride(0),
                                   y.stride(1), BLOCK=_block(x.shape[1]))
    return y


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")  # fp32 inputs at fp32 precision: the contract forbids TF32
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a: Tensor, b: Tensor) -> Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, 16), triton.cdiv(n, 16))
    _matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                         c.stride(1), BM=16, BN=16, BK=32)
    return c
