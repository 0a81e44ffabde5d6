"""Planted KDA bugs: each is a plausible mistake in a chunked or recurrent KDA forward (kda_core's signature)
that passes the KernelBench-style check — one shape (B=2 T=64 H=2 K=16 V=8, one 64-token chunk), randn fp32,
no initial state, no cu_seqlens — and must fail the contract gates.

They share one small chunked implementation (chunk 64, fp32) with a switch per mistake, so each bug differs
from the correct algorithm in exactly the line it names.
"""

from __future__ import annotations

import torch
from cake.experiments.kda.reference import segments
from torch import Tensor

CHUNK = 64


def _chunked(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, h0: Tensor | None, cu: Tensor | None, *,
             reset_per_sequence: bool = True, use_h0: bool = True, drop_tail: bool = False,
             beta_in_w: bool = True, decay_state_read: bool = True, state_dtype: torch.dtype = torch.float32,
             gate_dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    batch, total, heads, dk = q.shape
    dv = v.shape[-1]
    o = torch.zeros(batch, total, heads, dv)
    finals = []
    s = torch.zeros(heads, dk, dv)
    for n, (b, bos, eos) in enumerate(segments(batch, total, cu)):
        if reset_per_sequence or cu is None:  # batch rows are separate launches; segments share one
            s = torch.zeros(heads, dk, dv)
        if h0 is not None and use_h0:
            s = h0[n].float().clone()
        end_full = bos + (eos - bos) // CHUNK * CHUNK
        for start in range(bos, end_full if drop_tail else eos, CHUNK):
            end = min(start + CHUNK, eos)
            qc, kc, vc, gc, bc = (x[b, start:end].float().transpose(0, 1) for x in (q, k, v, g, beta))
            c = end - start
            gc = gc.cumsum(dim=1).to(gate_dtype).float()
            lower = torch.ones(c, c, dtype=torch.bool).tril()
            strict = lower & ~torch.eye(c, dtype=torch.bool)
            decay = torch.where(lower[None, :, :, None], (gc[:, :, None] - gc[:, None, :]).clamp(max=0).exp(),
                                torch.zeros(()))
            a = torch.where(strict, bc[:, :, None] * torch.einsum("hik,hjk,hijk->hij", kc, kc, decay), torch.zeros(()))
            eye = torch.eye(c).expand_as(a)
            tm = torch.linalg.solve_triangular(eye + a, eye, upper=False, unitriangular=True)
            kd = kc * gc.exp()
            w = tm @ ((bc[:, :, None] if beta_in_w else 1.0) * kd)
            u = tm @ (bc[:, :, None] * vc)
            s32 = s.float()
            vn = u - w @ s32
            qd = qc * gc.exp() if decay_state_read else qc
            p = torch.einsum("hik,hjk,hijk->hij", qc, kc, decay)
            o[b, start:end] = (dk ** -0.5 * (qd @ s32 + p @ vn)).transpose(0, 1)
            glast = gc[:, -1, :]
            s = (glast.exp()[:, :, None] * s32 + (kc * (glast[:, None, :] - gc).exp()).transpose(1, 2) @ vn).to(state_dtype)
        finals.append(s.float())
    return o.to(q.dtype), torch.stack(finals)


def kda_state_not_reset(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """varlen: sequence n starts from sequence n-1's final state instead of its own."""
    return _chunked(q, k, v, g, beta, h0, cu, reset_per_sequence=False)


def kda_ignores_initial_state(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """initial_state is accepted and never read."""
    return _chunked(q, k, v, g, beta, h0, cu, use_h0=False)


def kda_drops_tail_chunk(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """the last T % 64 tokens are never processed (floor instead of ceiling division)."""
    return _chunked(q, k, v, g, beta, h0, cu, drop_tail=True)


def kda_fp16_state(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """the carried state is held in fp16 between chunks."""
    return _chunked(q, k, v, g, beta, h0, cu, state_dtype=torch.float16)


def kda_beta_missing_from_w(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """beta left out of the WY term w that corrects for the incoming state (only visible from a nonzero state)."""
    return _chunked(q, k, v, g, beta, h0, cu, beta_in_w=False)


def kda_state_read_before_decay(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """wrong decay order: the incoming state is read by q before the chunk's decays are applied to it."""
    return _chunked(q, k, v, g, beta, h0, cu, decay_state_read=False)


def kda_assumes_contiguous(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """reads q through its storage as if it were contiguous (a pointer kernel that ignores strides)."""
    flat = torch.empty(0, dtype=q.dtype).set_(q.untyped_storage(), q.storage_offset(), q.shape)
    return _chunked(flat, k, v, g, beta, h0, cu)


def kda_gate_cumsum_in_input_dtype(q, k, v, g, beta, h0, cu):  # type: ignore[no-untyped-def]
    """the chunk's cumulative log-decays are stored in q's dtype: exp(gc_i - gc_j) then differences two rounded
    sums of up to 64 decays (fla keeps them in fp32). Invisible in fp32; a precision bug at bf16 and fp16."""
    return _chunked(q, k, v, g, beta, h0, cu, gate_dtype=q.dtype)


BUGS = (kda_state_not_reset, kda_ignores_initial_state, kda_drops_tail_chunk, kda_fp16_state,
        kda_beta_missing_from_w, kda_state_read_before_decay, kda_assumes_contiguous)
# Precision bugs: they pass in fp32 and must fail the value gates at the low-precision input dtypes.
LOW_PRECISION_BUGS = (kda_gate_cumsum_in_input_dtype,)
