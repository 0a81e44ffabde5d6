"""Correct KDA controls in torch: what calibration measures and what tests hold to every gate.

* `kda_core_recurrent` — the recurrence token by token in fp32 (fla's `naive_recurrent_kda` in fp32);
* `kda_core_chunked` — the chunked (WY) algorithm a fast kernel uses, in fp32, with the operands of every
  matrix product staged through the input dtype as a tensor-core kernel stages them (fla stores w, u, the
  corrected values and the per-chunk states in q's dtype). Its intra-chunk decays are formed pairwise,
  exp(gc_i - gc_j) with i >= j, so no exponent is positive whatever the chunk size;
* `kda_forward_*` — the same after the fused preprocessing (l2norm, sigmoid, safe gate) in fp32.

Each takes the contract's inputs in signature order and returns (o in q's dtype, final_state fp32).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from cake.experiments.kda.reference import L2NORM_EPS, LOWER_BOUND, segments
from torch import Tensor

CHUNK = 16


def _state0(initial_state: Tensor | None, n: int, heads: int, dk: int, dv: int, device: torch.device) -> Tensor:
    if initial_state is not None:
        return initial_state[n].float().clone()
    return torch.zeros(heads, dk, dv, dtype=torch.float32, device=device)


def _finish(o: Tensor, finals: list[Tensor], heads: int, dk: int, dv: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    state = torch.stack(finals) if finals else torch.zeros(0, heads, dk, dv, device=o.device)
    return o.to(dtype), state


def kda_core_recurrent(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial_state: Tensor | None,
                       cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
    batch, total, heads, dk = q.shape
    dv = v.shape[-1]
    qf, kf, vf, gf, bf = (t.float() for t in (q, k, v, g, beta))
    o = torch.zeros(batch, total, heads, dv, dtype=torch.float32, device=q.device)
    finals = []
    for n, (b, bos, eos) in enumerate(segments(batch, total, cu_seqlens)):
        s = _state0(initial_state, n, heads, dk, dv, q.device)
        for t in range(bos, eos):
            s = s * gf[b, t].exp()[:, :, None]
            kt = kf[b, t]
            s = s + bf[b, t][:, None, None] * kt[:, :, None] * (vf[b, t] - torch.einsum("hk,hkv->hv", kt, s))[:, None, :]
            o[b, t] = dk ** -0.5 * torch.einsum("hk,hkv->hv", qf[b, t], s)
        finals.append(s)
    return _finish(o, finals, heads, dk, dv, q.dtype)


def _stage(x: Tensor, dtype: torch.dtype) -> Tensor:
    """An operand as a tensor-core kernel feeds it: rounded to the input dtype, multiplied in fp32."""
    return x.to(dtype).float()


def chunk_step(qc: Tensor, kc: Tensor, vc: Tensor, gc_raw: Tensor, bc: Tensor, s: Tensor,
               dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """One chunk for all heads: qc, kc [H, C, K], vc [H, C, V], gc_raw [H, C, K] log-decays, bc [H, C], state
    s [H, K, V] fp32 -> (o chunk [H, C, V] unscaled, new state)."""
    c = qc.shape[1]
    gc = gc_raw.cumsum(dim=1)
    lower = torch.ones(c, c, dtype=torch.bool, device=qc.device).tril()
    # pairwise decays exp(gc_i - gc_j) for j <= i (never a positive exponent), zero above the diagonal
    diff = (gc[:, :, None, :] - gc[:, None, :, :]).clamp(max=0.0)
    decay = torch.where(lower[None, :, :, None], diff.exp(), torch.zeros((), device=qc.device))
    strict = lower & ~torch.eye(c, dtype=torch.bool, device=qc.device)
    a = torch.where(strict, bc[:, :, None] * torch.einsum("hik,hjk,hijk->hij", kc, kc, decay), torch.zeros(()))
    eye = torch.eye(c, device=qc.device).expand_as(a)
    tm = torch.linalg.solve_triangular(eye + a, eye, upper=False, unitriangular=True)
    kd = kc * gc.exp()
    w = _stage(tm @ (bc[:, :, None] * kd), dtype)
    u = _stage(tm @ (bc[:, :, None] * vc), dtype)
    s_in = _stage(s, dtype)
    vn = _stage(u - w @ s_in, dtype)
    p = torch.einsum("hik,hjk,hijk->hij", qc, kc, decay)
    o = _stage(qc * gc.exp(), dtype) @ s_in + _stage(p, dtype) @ vn  # decayed queries in q's dtype, as fla's qg
    glast = gc[:, -1, :]
    kl = kc * (glast[:, None, :] - gc).exp()
    s = glast.exp()[:, :, None] * s + kl.transpose(1, 2) @ vn
    return o, s


def kda_core_chunked(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial_state: Tensor | None,
                     cu_seqlens: Tensor | None, chunk: int = CHUNK) -> tuple[Tensor, Tensor]:
    batch, total, heads, dk = q.shape
    dv = v.shape[-1]
    o = torch.zeros(batch, total, heads, dv, dtype=torch.float32, device=q.device)
    finals = []
    for n, (b, bos, eos) in enumerate(segments(batch, total, cu_seqlens)):
        s = _state0(initial_state, n, heads, dk, dv, q.device)
        for start in range(bos, eos, chunk):
            end = min(start + chunk, eos)
            qc, kc, vc, gc, bc = (x[b, start:end].float().transpose(0, 1) for x in (q, k, v, g, beta))
            oc, s = chunk_step(qc, kc, vc, gc, bc, s, q.dtype)
            o[b, start:end] = dk ** -0.5 * oc.transpose(0, 1)
        finals.append(s)
    return _finish(o, finals, heads, dk, dv, q.dtype)


def preactivate32(q: Tensor, k: Tensor, g: Tensor, beta: Tensor, a_log: Tensor,
                  dt_bias: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The fused preprocessing in fp32; q and k go back to their dtype as a fused kernel's loads feed them."""
    qf, kf = q.float(), k.float()
    qn = qf * torch.rsqrt((qf * qf).sum(-1, keepdim=True) + L2NORM_EPS)
    kn = kf * torch.rsqrt((kf * kf).sum(-1, keepdim=True) + L2NORM_EPS)
    gate = LOWER_BOUND * torch.sigmoid(a_log.float().exp()[:, None] * (g.float() + dt_bias.float()))
    return qn, kn, gate, torch.sigmoid(beta.float())


def _fused(core: Callable[..., tuple[Tensor, Tensor]]) -> Callable[..., tuple[Tensor, Tensor]]:
    def run(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, a_log: Tensor, dt_bias: Tensor,
            initial_state: Tensor | None, cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
        qn, kn, gate, b = preactivate32(q, k, g, beta, a_log, dt_bias)
        return core(qn.to(q.dtype), kn.to(k.dtype), v, gate, b, initial_state, cu_seqlens)
    run.__name__ = core.__name__.replace("core", "forward")
    return run


kda_forward_recurrent = _fused(kda_core_recurrent)
kda_forward_chunked = _fused(kda_core_chunked)

CONTROLS: dict[str, dict[str, Callable[..., tuple[Tensor, Tensor]]]] = {
    "kda_core": {"recurrent": kda_core_recurrent, "chunked": kda_core_chunked},
    "kda_forward": {"recurrent": kda_forward_recurrent, "chunked": kda_forward_chunked},
}
