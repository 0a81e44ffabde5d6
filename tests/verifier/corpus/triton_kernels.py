"""Small Triton kernels, correct and planted-bug, that run on the CPU under TRITON_INTERPRET=1.

Every kernel upcasts to fp32 right after the load: under Triton 3.9's interpreter bf16 arithmetic is
garbage (DESIGN.md), while bf16 loads and conversions are exact. Row kernels launch one program per
row and loop over column blocks, so the tail block is where masking matters.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

BLOCK_N = 32  # small, so contract shapes that are not multiples of it exercise the tail


@triton.jit
def _row_sum_kernel(x_ptr, y_ptr, n_cols, stride_row, stride_col,
                    BLOCK: tl.constexpr, ACC_IN_INPUT_DTYPE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if ACC_IN_INPUT_DTYPE:
        acc = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=cols < n_cols, other=0.0)
        acc += x.to(acc.dtype)  # BUG when ACC_IN_INPUT_DTYPE: the running sum rounds to fp16 per block
    tl.store(y_ptr + row, tl.sum(acc.to(tl.float32), axis=0).to(y_ptr.dtype.element_ty))


def _row_sum(x: Tensor, acc_in_input_dtype: bool) -> Tensor:
    m, n = x.shape
    y = torch.empty(m, dtype=x.dtype, device=x.device)
    if m:
        _row_sum_kernel[(m,)](x, y, n, x.stride(0), x.stride(1), BLOCK=BLOCK_N,
                              ACC_IN_INPUT_DTYPE=acc_in_input_dtype)
    return y


def row_sum_triton(x: Tensor) -> Tensor:
    return _row_sum(x, acc_in_input_dtype=False)


def row_sum_triton_half_accumulator(x: Tensor) -> Tensor:
    return _row_sum(x, acc_in_input_dtype=True)


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_row, stride_col, out_stride,
                    BLOCK: tl.constexpr, ASSUME_CONTIGUOUS: tl.constexpr):
    # One block holds the whole row (BLOCK = next power of two >= n_cols).
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    if ASSUME_CONTIGUOUS:
        # BUG: addresses rows as row * n_cols + col, ignoring the strides it was given: a transposed,
        # sliced or strided x is read from the wrong places.
        offsets = row * n_cols + cols
    else:
        offsets = row * stride_row + cols * stride_col
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * out_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _softmax(x: Tensor, assume_contiguous: bool) -> Tensor:
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m and n:
        _softmax_kernel[(m,)](x, y, n, x.stride(0), x.stride(1), y.stride(0),
                              BLOCK=triton.next_power_of_2(n), ASSUME_CONTIGUOUS=assume_contiguous)
    return y


def softmax_triton(x: Tensor) -> Tensor:
    return _softmax(x, assume_contiguous=False)


def softmax_triton_assumes_contiguous(x: Tensor) -> Tensor:
    return _softmax(x, assume_contiguous=True)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride_row, stride_col, w_stride, out_stride, eps,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=cols < n_cols, other=0.0).to(tl.float32)
        sq += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols * w_stride, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * out_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_triton(x: Tensor, w: Tensor) -> Tensor:
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m and n:
        _rmsnorm_kernel[(m,)](x, w, y, n, x.stride(0), x.stride(1), w.stride(0), y.stride(0), 1e-6,
                              BLOCK=BLOCK_N)
    return y
