"""Baselines for the KDA workload, each in the contract's signature (`kda_forward`: FlashKDA's fused semantics):

* `fla_chunk_kda` — fla-core 0.6.0 `chunk_kda` with the fused flags (l2norm, gate and beta sigmoid in the
  kernel, safe gate with lower_bound -5, A_log, dt_bias), with `FLA_FLASH_KDA=0` so fla does not silently
  dispatch to FlashKDA when that is importable;
* `fla_fused_recurrent_kda` — fla's token-by-token kernel with the same flags;
* `flash_kda` — FlashKDA's `flash_kda.fwd` (V-first state: transposed in and out here).

Loaders import lazily and raise `BaselineUnavailable` with an install hint; nothing runs at import.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from cake.experiments.kda.reference import LOWER_BOUND
from cake.experiments.workload import Baseline, BaselineUnavailable, Prepared

FLA_REQUIREMENT = "fla-core==0.6.0"
FLA_HINT = (f"`pip install {FLA_REQUIREMENT}` (on the GPU machine, carry the wheel and its dependencies in .whl/: "
            "fla_core-0.6.0-py3-none-any.whl, einops)")
FLASH_KDA_HINT = ("build FlashKDA from source (its repository with CUTLASS, FLASH_KDA_CUDA_ARCHS=90a); the "
                  "tokenspeed-flashkda cp312 wheel refuses every call under torch 2.11 (built against another torch)")


def _require_cuda(what: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise BaselineUnavailable(f"{what} runs on CUDA only; no GPU here")


def fla_module(name: str) -> Any:
    """An fla module, imported with FLA_FLASH_KDA=0 (a different value already set is refused, not overridden)."""
    flag = os.environ.setdefault("FLA_FLASH_KDA", "0")
    if flag != "0":
        raise BaselineUnavailable(f"FLA_FLASH_KDA={flag}: fla would dispatch chunk_kda to FlashKDA; unset it or set 0")
    try:
        return importlib.import_module(name)
    except ImportError as missing:
        raise BaselineUnavailable(f"fla is not installed ({missing}); {FLA_HINT}") from None


def fused_kwargs(a_log: Any, dt_bias: Any, initial_state: Any, cu_seqlens: Any) -> dict[str, Any]:
    return {"initial_state": initial_state, "output_final_state": True, "use_qk_l2norm_in_kernel": True,
            "use_gate_in_kernel": True, "use_beta_sigmoid_in_kernel": True, "lower_bound": LOWER_BOUND,
            "A_log": a_log, "dt_bias": dt_bias.reshape(-1), "cu_seqlens": cu_seqlens}  # fla takes dt_bias [H*K]


def load_fla_chunk_kda() -> Prepared:
    module = fla_module("fla.ops.kda")
    _require_cuda("fla chunk_kda")

    def run(q: Any, k: Any, v: Any, g: Any, beta: Any, a_log: Any, dt_bias: Any, initial_state: Any,
            cu_seqlens: Any) -> Any:
        return module.chunk_kda(q, k, v, g, beta, safe_gate=True,
                                **fused_kwargs(a_log, dt_bias, initial_state, cu_seqlens))
    return Prepared(run=run)


def load_fla_fused_recurrent_kda() -> Prepared:
    module = fla_module("fla.ops.kda")
    _require_cuda("fla fused_recurrent_kda")

    def run(q: Any, k: Any, v: Any, g: Any, beta: Any, a_log: Any, dt_bias: Any, initial_state: Any,
            cu_seqlens: Any) -> Any:
        return module.fused_recurrent_kda(q, k, v, g, beta, **fused_kwargs(a_log, dt_bias, initial_state, cu_seqlens))
    return Prepared(run=run)


def load_flash_kda() -> Prepared:
    try:
        flash_kda = importlib.import_module("flash_kda")
    except ImportError as missing:
        raise BaselineUnavailable(f"flash_kda is not importable ({missing}); {FLASH_KDA_HINT}") from None
    _require_cuda("FlashKDA")
    import torch

    def run(q: Any, k: Any, v: Any, g: Any, beta: Any, a_log: Any, dt_bias: Any, initial_state: Any,
            cu_seqlens: Any) -> Any:
        count = q.shape[0] if cu_seqlens is None else cu_seqlens.numel() - 1
        heads, dk, dv = q.shape[2], q.shape[3], v.shape[3]
        out = torch.empty_like(v)
        final = torch.empty(count, heads, dv, dk, dtype=torch.float32, device=q.device)  # V-first
        h0 = None if initial_state is None else initial_state.transpose(-1, -2).contiguous()
        flash_kda.fwd(q, k, v, g, beta, dk ** -0.5, out, A_log=a_log, dt_bias=dt_bias, lower_bound=LOWER_BOUND,
                      initial_state=h0, final_state=final, cu_seqlens=cu_seqlens)
        return out, final.transpose(-1, -2)
    return Prepared(run=run)


FLA_CHUNK = Baseline("fla_chunk_kda", "fla-core 0.6.0 chunk_kda, fused flags, FLA_FLASH_KDA=0", load_fla_chunk_kda,
                     FLA_REQUIREMENT)
FLA_RECURRENT = Baseline("fla_fused_recurrent_kda", "fla-core 0.6.0 fused_recurrent_kda, fused flags",
                         load_fla_fused_recurrent_kda, FLA_REQUIREMENT)
FLASH_KDA = Baseline("flash_kda", "FlashKDA flash_kda.fwd (state V-first, transposed here)", load_flash_kda,
                     "flash_kda (built from source)")
FORWARD_BASELINES: tuple[Baseline, ...] = (FLA_CHUNK, FLA_RECURRENT, FLASH_KDA)
