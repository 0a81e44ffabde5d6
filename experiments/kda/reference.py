"""fp64 meaning of the KDA ops (fla's `naive_recurrent_kda`, K-first state), their tolerance scales, and
the fused preprocessing of FlashKDA's benchmark semantics. Written from the recurrence in issue 14:

    per sequence and head, S in R^{K x V} (from initial_state, else 0); for each token t:
        S <- diag(exp(g_t)) S;   S <- S + beta_t k_t (v_t - S^T k_t)^T;   o_t = scale * S^T q_t

with scale = K^-1/2. A reference takes the contract's inputs in signature order (floats in fp64, integers in
int64, an omitted optional input as None) and returns (o, final_state). With `cu_seqlens` (B = 1) each segment
[c_n, c_{n+1}) starts from initial_state[n] (or 0) and returns final_state[n]; without it, each batch row is
one sequence.
"""

from __future__ import annotations

import torch
from torch import Tensor

L2NORM_EPS = 1e-6  # fla's l2norm: x / sqrt(sum(x^2) + eps), part of the fused op's definition
LOWER_BOUND = -5.0  # FlashKDA's safe gate: g = LOWER_BOUND * sigmoid(exp(A_log) * (g_raw + dt_bias))


def segments(batch: int, total: int, cu_seqlens: Tensor | None) -> list[tuple[int, int, int]]:
    """(batch row, begin, end) per sequence, in final-state order."""
    if cu_seqlens is None:
        return [(b, 0, total) for b in range(batch)]
    cuts = [int(c) for c in cu_seqlens.tolist()]
    return [(0, cuts[n], cuts[n + 1]) for n in range(len(cuts) - 1)]


def kda_core(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial_state: Tensor | None,
             cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
    batch, total, heads, dk = q.shape
    dv = v.shape[-1]
    scale = dk ** -0.5
    o = torch.zeros(batch, total, heads, dv, dtype=q.dtype, device=q.device)
    finals = []
    for n, (b, bos, eos) in enumerate(segments(batch, total, cu_seqlens)):
        s = (initial_state[n].clone() if initial_state is not None
             else torch.zeros(heads, dk, dv, dtype=q.dtype, device=q.device))
        for t in range(bos, eos):
            s = s * g[b, t].exp()[:, :, None]
            kt = k[b, t]
            predicted = torch.einsum("hk,hkv->hv", kt, s)
            s = s + beta[b, t][:, None, None] * kt[:, :, None] * (v[b, t] - predicted)[:, None, :]
            o[b, t] = scale * torch.einsum("hk,hkv->hv", q[b, t], s)
        finals.append(s)
    state = torch.stack(finals) if finals else torch.zeros(0, heads, dk, dv, dtype=q.dtype, device=q.device)
    return o, state


def kda_core_scale(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial_state: Tensor | None,
                   cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
    """The magnitude an output's rounding error is proportional to: with unit-norm keys, beta in [0, 1] and
    decays <= 1 the state holds combinations of the values seen so far, so o[t] is judged against the
    running max |v| of its own sequence up to t (and |initial_state|); final_state against its sequence's."""
    batch, total, heads, _ = q.shape
    o_scale = torch.zeros(batch, total, heads, 1, dtype=v.dtype, device=v.device)
    finals = []
    vmax = v.abs().amax(dim=-1)  # [B, T, H]
    for n, (b, bos, eos) in enumerate(segments(batch, total, cu_seqlens)):
        start = (initial_state[n].abs().amax(dim=(-1, -2)) if initial_state is not None
                 else torch.zeros(heads, dtype=v.dtype, device=v.device))
        if eos > bos:
            running = torch.maximum(vmax[b, bos:eos].cummax(dim=0).values, start[None, :])
            o_scale[b, bos:eos, :, 0] = running
            finals.append(running[-1])
        else:
            finals.append(start)
    state_scale = (torch.stack(finals)[:, :, None, None] if finals
                   else torch.zeros(0, heads, 1, 1, dtype=v.dtype, device=v.device))
    return o_scale, state_scale


def kda_core_rounding(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial_state: Tensor | None,
                      cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
    """The magnitude that rounding the operands to the input dtype perturbs (the tolerance model's `rounding`, times
    eps(input dtype)). Correct kernels feed the tensor cores in q's dtype: the normalized q and k, the decayed
    queries and keys, and the chunk state. Rounding k_t (unit norm, entries ~ K^-1/2) by a relative eps moves the
    rank-1 update beta_t k_t (v_t - S^T k_t)^T by ~ eps K^-1/2 |v|, and rounding q_t or the state moves
    o_t = K^-1/2 S^T q_t by ~ eps K^-1/2 |S|, with |S| ~ the running magnitude of kda_core_scale. Each product has
    two rounded operands (q_t or the state, and k_t): a factor 2.

    The recurrence carries a perturbation of row k from token s to token t scaled by exp(G_t,k - G_s,k) (G the
    cumulative log-decay; I - beta k k^T is a contraction), and independent roundings add in quadrature, so after t
    tokens row k holds sqrt(n_t,k) of them with n_t = exp(2 g_t) n_{t-1} + 1: t without decay, ~1 under FlashKDA's
    typical decays. final_state row k gets 2 scale K^-1/2 sqrt(n_k) at its sequence's end; o[t] mixes every row with
    weights q_k^2 (unit q), so it gets 2 scale[t] K^-1/2 sqrt(mean_k n_t,k)."""
    batch, total, heads, dk = q.shape
    o_scale, state_scale = kda_core_scale(q, k, v, g, beta, initial_state, cu_seqlens)
    o_tokens = torch.zeros(batch, total, heads, 1, dtype=o_scale.dtype, device=o_scale.device)
    state_tokens = []
    carry = (2.0 * g).exp()  # [B, T, H, K]: how much of a row's squared perturbation survives each token
    for b, bos, eos in segments(batch, total, cu_seqlens):
        n = torch.zeros(heads, dk, dtype=o_scale.dtype, device=o_scale.device)
        for t in range(bos, eos):
            n = carry[b, t] * n + 1.0
            o_tokens[b, t, :, 0] = n.mean(dim=-1)
        state_tokens.append(n)
    n_final = (torch.stack(state_tokens)[..., None] if state_tokens
               else torch.zeros(0, heads, dk, 1, dtype=state_scale.dtype, device=state_scale.device))
    operands = 2.0
    return (operands * o_scale * o_tokens.sqrt() * dk ** -0.5,
            operands * state_scale * n_final.sqrt() * dk ** -0.5)


def l2norm(x: Tensor) -> Tensor:
    return x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) + L2NORM_EPS)


def fused_gate(g_raw: Tensor, a_log: Tensor, dt_bias: Tensor) -> Tensor:
    """FlashKDA's safe gate: g = LOWER_BOUND * sigmoid(exp(A_log[h]) * (g_raw + dt_bias[h])), in [LOWER_BOUND, 0]."""
    return LOWER_BOUND * torch.sigmoid(a_log.exp()[:, None] * (g_raw + dt_bias))


def preactivate(q: Tensor, k: Tensor, g_raw: Tensor, beta_logits: Tensor, a_log: Tensor,
                dt_bias: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The fused semantics' inputs turned into kda_core's (q, k, g, beta)."""
    return l2norm(q), l2norm(k), fused_gate(g_raw, a_log, dt_bias), torch.sigmoid(beta_logits)


def kda_forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, a_log: Tensor, dt_bias: Tensor,
                initial_state: Tensor | None, cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
    qn, kn, gate, b = preactivate(q, k, g, beta, a_log, dt_bias)
    return kda_core(qn, kn, v, gate, b, initial_state, cu_seqlens)


def kda_forward_scale(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, a_log: Tensor, dt_bias: Tensor,
                      initial_state: Tensor | None, cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
    return kda_core_scale(q, k, v, g, beta, initial_state, cu_seqlens)


def kda_forward_rounding(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, a_log: Tensor, dt_bias: Tensor,
                         initial_state: Tensor | None, cu_seqlens: Tensor | None) -> tuple[Tensor, Tensor]:
    qn, kn, gate, b = preactivate(q, k, g, beta, a_log, dt_bias)
    return kda_core_rounding(qn, kn, v, gate, b, initial_state, cu_seqlens)
