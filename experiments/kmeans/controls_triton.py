"""Correct Triton controls for kmeans assign and update, written plainly so they run under TRITON_INTERPRET=1.

Import this module only after TRITON_INTERPRET is set (on CPU): `triton.jit` decides at decoration time
whether a function is interpreted; the workload's `Controls` load it lazily for that reason.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


def _block(n: int) -> int:
    return max(16, triton.next_power_of_2(max(1, n)))



@triton.jit
def _assign_kernel(x_ptr, c_ptr, ids_ptr, N, K, D, sxb, sxn, sxd, scb, sck, scd,
                   BN: tl.constexpr, BK: tl.constexpr, BD: tl.constexpr):
    b = tl.program_id(0)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rd = tl.arange(0, BD)
    x = tl.load(x_ptr + b * sxb + rn[:, None] * sxn + rd[None, :] * sxd,
                mask=(rn[:, None] < N) & (rd[None, :] < D), other=0.0)
    xf = x.to(tl.float32)
    xsq = tl.sum(xf * xf, axis=1)
    best = tl.full((BN,), float("inf"), dtype=tl.float32)
    besti = tl.zeros((BN,), dtype=tl.int64)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        c = tl.load(c_ptr + b * scb + rk[:, None] * sck + rd[None, :] * scd,
                    mask=(rk[:, None] < K) & (rd[None, :] < D), other=0.0)
        cf = c.to(tl.float32)
        dist = xsq[:, None] - 2.0 * tl.dot(x, tl.trans(c), input_precision="ieee") + tl.sum(cf * cf, axis=1)[None, :]
        dist = tl.where((rk[None, :] < K) & (dist == dist), dist, float("inf"))  # NaN is never the minimum
        tile_min = tl.min(dist, axis=1)
        tile_arg = tl.argmin(dist, axis=1).to(tl.int64) + k0
        better = tile_min < best
        best = tl.where(better, tile_min, best)
        besti = tl.where(better, tile_arg, besti)
    tl.store(ids_ptr + b * N + rn, besti, mask=rn < N)


def kmeans_assign(x: Tensor, c: Tensor) -> Tensor:
    bsz, n, d = x.shape
    k = c.shape[1]
    ids = torch.empty(bsz, n, dtype=torch.int64, device=x.device)
    _assign_kernel[(bsz, triton.cdiv(n, 16))](x, c, ids, n, k, d, *x.stride(), *c.stride(), BN=16, BK=16, BD=_block(d))
    return ids


@triton.jit
def _update_kernel(x_ptr, ids_ptr, c_ptr, out_ptr, N, K, D, sxb, sxn, sxd, sib, sin, scb, sck, scd,
                   BN: tl.constexpr, BK: tl.constexpr, BD: tl.constexpr):
    # One program per (batch, block of BK clusters) sweeps the points once in blocks of BN: a masked
    # [BN, BK, BD] select-and-sum (not a one-hot matmul: 0 * NaN would leak a point's NaN into every
    # cluster). Few programs keep the interpreter fast; a fixed order keeps results byte-identical.
    b = tl.program_id(0)
    rk = tl.program_id(1) * BK + tl.arange(0, BK)
    rd = tl.arange(0, BD)
    acc = tl.zeros((BK, BD), dtype=tl.float32)
    count = tl.zeros((BK,), dtype=tl.float32)
    for n0 in range(0, N, BN):
        rn = n0 + tl.arange(0, BN)
        ids = tl.load(ids_ptr + b * sib + rn * sin, mask=rn < N, other=-1)
        mine = ids[:, None] == rk[None, :]  # [BN, BK]
        x = tl.load(x_ptr + b * sxb + rn[:, None] * sxn + rd[None, :] * sxd,
                    mask=(rn[:, None] < N) & (rd[None, :] < D), other=0.0).to(tl.float32)  # [BN, BD]
        acc += tl.sum(tl.where(mine[:, :, None], x[:, None, :], 0.0), axis=0)
        count += tl.sum(mine.to(tl.float32), axis=0)
    cmask = (rk[:, None] < K) & (rd[None, :] < D)
    old = tl.load(c_ptr + b * scb + rk[:, None] * sck + rd[None, :] * scd, mask=cmask, other=0.0).to(tl.float32)
    total = count[:, None]
    new = tl.where(total > 0, acc / tl.maximum(total, 1.0), old)  # an empty cluster keeps c_old[k]
    tl.store(out_ptr + (b * K + rk[:, None]) * D + rd[None, :], new.to(out_ptr.dtype.element_ty), mask=cmask)


_UPDATE_TILE_ELEMENTS = 1 << 17  # the [BN, BK, BD] select-and-sum tile


def kmeans_update(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    bsz, n, d = x.shape
    k = c_old.shape[1]
    out = torch.empty(bsz, k, d, dtype=x.dtype, device=x.device)
    bd = _block(d)
    bn = max(16, min(1024, _UPDATE_TILE_ELEMENTS // (16 * bd)))  # few long steps: the interpreter pays per op
    _update_kernel[(bsz, triton.cdiv(k, 16))](x, ids, c_old, out, n, k, d, *x.stride(), *ids.stride(), *c_old.stride(),
                                              BN=bn, BK=16, BD=bd)
    return out
