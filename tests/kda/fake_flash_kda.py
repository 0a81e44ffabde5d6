"""A stand-in for FlashKDA's extension on the CPU (tests of the FlashKDA baseline's adapter and its smoke script):
it refuses what FlashKDA refuses and computes with the fp64 reference, so a test using it judges argument mapping,
never FlashKDA's numbers."""

from __future__ import annotations

from typing import Any

import torch
from cake.experiments.kda import baselines
from cake.experiments.kda import reference as ref

WIDTH = baselines.FLASH_KDA_WIDTH


class FakeFlashKDA:
    """Refuses what FlashKDA's flash_kda.cpp checks refuse (bf16 token tensors, contiguity, D == 128, fp32 A_log
    and dt_bias [H, 128], V-first states [N, H, 128, 128], int64 cu_seqlens with B = 1) and a strided cu_seqlens
    (unchecked there, read as contiguous), records each call, and writes the fp64 reference at the widths it was
    given and the scale it was passed."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def fwd(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
            scale: float, out: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor, lower_bound: float,
            initial_state: torch.Tensor | None = None, final_state: torch.Tensor | None = None,
            cu_seqlens: torch.Tensor | None = None) -> None:
        tokens = (q, k, v, g, beta, out)
        if not all(t.is_contiguous() for t in (*tokens, A_log, dt_bias)):
            raise RuntimeError("all tensors must be contiguous")
        if any(t.dtype != torch.bfloat16 for t in tokens):
            raise RuntimeError("q, k, v, g, beta and out must be bfloat16")
        batch, total, heads, width = q.shape
        if width != WIDTH or any(t.shape != q.shape for t in (k, v, g, out)):
            raise RuntimeError("currently only supports D == 128; k, v, g, out must match q")
        if A_log.dtype != torch.float32 or dt_bias.dtype != torch.float32 or dt_bias.shape != (heads, WIDTH):
            raise RuntimeError("A_log [H] and dt_bias [H, D] must be float32")
        count = batch if cu_seqlens is None else cu_seqlens.numel() - 1
        if cu_seqlens is not None and (batch != 1 or cu_seqlens.dtype != torch.int64):
            raise RuntimeError("cu_seqlens must be int64 with B == 1")
        if cu_seqlens is not None and not cu_seqlens.is_contiguous():  # FlashKDA reads it as contiguous unchecked
            raise RuntimeError("a strided cu_seqlens would be read as contiguous")
        for state in (initial_state, final_state):
            if state is not None and (state.shape != (count, heads, WIDTH, WIDTH) or not state.is_contiguous()):
                raise RuntimeError("initial_state/final_state must be contiguous [N, H, D, D]")
        self.calls.append({"q": q, "k": k, "v": v, "g": g, "scale": scale, "dt_bias": dt_bias,
                           "lower_bound": lower_bound, "initial_state": initial_state, "out": out})
        h0 = None if initial_state is None else initial_state.transpose(-1, -2).double()  # V-first -> K-first
        o, state = ref.kda_forward(*(t.double() for t in (q, k, v, g, beta, A_log, dt_bias)), h0, cu_seqlens)
        out.copy_(o * (scale / width ** -0.5))  # the reference scales by K^-1/2 of the width it sees
        if final_state is not None:
            final_state.copy_(state.transpose(-1, -2))
