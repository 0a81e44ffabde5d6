"""Planted softmax bugs: each passes one-shape randn allclose and breaks the contract."""

from __future__ import annotations

import torch
from torch import Tensor


def softmax_no_max_subtraction(x: Tensor) -> Tensor:
    # BUG: exp(x) without subtracting the row max overflows to inf for x > ~88, giving inf/inf = NaN.
    e = torch.exp(x.float())
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def softmax_nan_to_zero(x: Tensor) -> Tensor:
    # BUG: "sanitizes" NaN/Inf, so a row holding NaN gives numbers instead of NaN, and +Inf becomes finite.
    x32 = torch.nan_to_num(x.float(), nan=0.0, posinf=1e4, neginf=-1e4)
    return torch.softmax(x32, dim=-1).to(x.dtype)


def softmax_half_math(x: Tensor) -> Tensor:
    # BUG: computes in the input dtype; fp16 exp/sum lose precision on long rows, and bf16 is worse.
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    acc = torch.zeros_like(e[..., :1])
    for start in range(0, x.shape[-1], 32):  # running sum held in x.dtype across chunks
        acc = acc + e[..., start:start + 32].sum(dim=-1, keepdim=True)
    return e / acc
