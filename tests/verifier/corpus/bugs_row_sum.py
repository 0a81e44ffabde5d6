"""Planted row_sum bugs."""

from __future__ import annotations

import weakref

import torch
from torch import Tensor

_OUT_BUFFERS: dict[tuple[tuple[int, ...], torch.dtype], Tensor] = {}
# Keyed by the input tensor object (id plus a weak reference, so a freed input whose id is reused by a
# new tensor is not confused with it).
_RESULTS: dict[int, tuple[weakref.ref[Tensor], Tensor]] = {}


def row_sum_fp16_accumulator(x: Tensor) -> Tensor:
    # BUG: the running sum is held in x.dtype across 64-column chunks (no fp32 accumulator).
    acc = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], 64):
        acc = acc + x[..., start:start + 64].sum(dim=-1)
    return acc


def row_sum_drops_remainder(x: Tensor) -> Tensor:
    # BUG: a row that fits one 64-wide tile is summed whole, but the multi-tile path walks whole tiles
    # only, so for N > 64 the last N % 64 columns are never added.
    n = x.shape[-1]
    if n <= 64:
        return x.float().sum(dim=-1).to(x.dtype)
    return x[..., : n - n % 64].float().sum(dim=-1).to(x.dtype)


def row_sum_flush_subnormals(x: Tensor) -> Tensor:
    # BUG: flushes subnormal inputs to zero ("denormals are slow"), so rows of tiny values sum to 0.
    tiny = torch.finfo(x.dtype).tiny
    x = torch.where(x.abs() < tiny, torch.zeros_like(x), x)
    return x.float().sum(dim=-1).to(x.dtype)


def row_sum_reuses_output(x: Tensor) -> Tensor:
    # BUG: keeps one output buffer per shape and returns it every call: the caller's earlier result
    # is silently overwritten by the next call.
    key = (tuple(x.shape), x.dtype)
    out = _OUT_BUFFERS.get(key)
    if out is None or out.device != x.device:
        out = _OUT_BUFFERS[key] = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    out.copy_(x.float().sum(dim=-1))
    return out


def row_sum_caches_results(x: Tensor) -> Tensor:
    # BUG: memoizes per input tensor ("the same activation is summed twice"): new values written into
    # the same tensor in place get the stale answer.
    hit = _RESULTS.get(id(x))
    if hit is not None and hit[0]() is x:
        return hit[1]
    y = x.float().sum(dim=-1).to(x.dtype)
    _RESULTS[id(x)] = (weakref.ref(x), y)
    return y
