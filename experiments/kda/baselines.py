"""Baselines for the KDA workload, each in the contract's signature (`kda_forward`: FlashKDA's fused semantics):

* `fla_chunk_kda` — fla-core 0.6.0 `chunk_kda` with the fused flags (l2norm, gate and beta sigmoid in the
  kernel, safe gate with lower_bound -5, A_log, dt_bias), with `FLA_FLASH_KDA=0` so fla does not silently
  dispatch to FlashKDA when that is importable;
* `fla_fused_recurrent_kda` — fla's token-by-token kernel with the same flags;
* `flash_kda` — FlashKDA's `flash_kda.fwd` (MoonshotAI/FlashKDA built from source:
  experiments/kda/flashkda_source.json, scripts/gpu/flashkda_build.sh). Its one head width is 128 and it takes
  contiguous bf16 with a V-first state; `flash_kda_forward` maps the contract onto that (below).

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
            "fla_core-0.6.0-py3-none-any.whl, einops-0.8.2-py3-none-any.whl)")
FLASH_KDA_HINT = ("build FlashKDA from source on the GPU machine: `bash scripts/gpu/flashkda_build.sh` with .flashkda/ "
                  "carried (experiments/kda/flashkda_source.json says how to fill it); the tokenspeed-flashkda cp312 "
                  "wheel refuses every call under torch 2.11 (built against another torch)")


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


# FlashKDA compiles one head width ("currently only supports D == 128"): K = V = 128.
FLASH_KDA_WIDTH = 128


def _pad_last(x: Any, width: int) -> Any:
    """x zero-padded along its last dim to `width` (x itself, no copy, when it is already that wide)."""
    import torch.nn.functional as F

    return x if x.shape[-1] == width else F.pad(x, (0, width - x.shape[-1]))


def flash_kda_forward(module: Any, q: Any, k: Any, v: Any, g: Any, beta: Any, a_log: Any, dt_bias: Any,
                      initial_state: Any, cu_seqlens: Any) -> tuple[Any, Any]:
    """`module.fwd` (FlashKDA's API) in kda_forward's signature.

    * State layout: the contract's state is K-first [N, H, K, V]; FlashKDA's is V-first [N, H, V, K]. The
      initial state goes in transposed, the final state comes back as a transposed view.
    * Head widths below 128: q, k, g, dt_bias are zero-padded along K and v along V (the initial state along
      both), and o and the final state sliced back. That is exact, not an approximation: a zero key or query
      channel adds exact zeros to every L2 norm and inner product and leaves its state row at zero whatever its
      decay, and a zero value column keeps its state column at zero. The scale stays the contract's K^-1/2 of
      the true K (FlashKDA takes it as an argument). At K = V = 128, the benchmark's widths, nothing is copied.
    * Layout: FlashKDA's API takes contiguous tensors only; the gates' strided layouts are copied to contiguous
      ones (no copy for contiguous inputs). cu_seqlens too: FlashKDA does not check that one, it reads its pointer
      as contiguous. Dtypes are left alone: FlashKDA takes bf16 only and says so itself.
    """
    import torch
    import torch.nn.functional as F

    dk, dv = q.shape[-1], v.shape[-1]
    if dk > FLASH_KDA_WIDTH or dv > FLASH_KDA_WIDTH:
        raise ValueError(f"FlashKDA computes head widths up to {FLASH_KDA_WIDTH} (K = V = {FLASH_KDA_WIDTH}, "
                         f"smaller ones zero-padded here); got K={dk}, V={dv}")
    width = FLASH_KDA_WIDTH
    batch, total, heads = q.shape[0], q.shape[1], q.shape[2]
    count = batch if cu_seqlens is None else cu_seqlens.numel() - 1
    qp, kp, gp = (_pad_last(x.contiguous(), width) for x in (q, k, g))
    vp = _pad_last(v.contiguous(), width)
    dt_bias_p = _pad_last(dt_bias.contiguous(), width)
    h0 = None
    if initial_state is not None:  # [N, H, K, V] -> V-first [N, H, V, K] (a copy at any width), both dims padded
        h0 = F.pad(initial_state.transpose(-1, -2), (0, width - dk, 0, width - dv)).contiguous()
    out = torch.empty(batch, total, heads, width, dtype=v.dtype, device=v.device)
    final = torch.empty(count, heads, width, width, dtype=torch.float32, device=q.device)  # V-first
    module.fwd(qp, kp, vp, gp, beta.contiguous(), dk ** -0.5, out, A_log=a_log.contiguous(), dt_bias=dt_bias_p,
               lower_bound=LOWER_BOUND, initial_state=h0, final_state=final,
               cu_seqlens=None if cu_seqlens is None else cu_seqlens.contiguous())
    return out[..., :dv], final[:, :, :dv, :dk].transpose(-1, -2)


def load_flash_kda() -> Prepared:
    try:
        flash_kda = importlib.import_module("flash_kda")
    except ImportError as missing:
        raise BaselineUnavailable(f"flash_kda is not importable ({missing}); {FLASH_KDA_HINT}") from None
    _require_cuda("FlashKDA")

    def run(q: Any, k: Any, v: Any, g: Any, beta: Any, a_log: Any, dt_bias: Any, initial_state: Any,
            cu_seqlens: Any) -> Any:
        return flash_kda_forward(flash_kda, q, k, v, g, beta, a_log, dt_bias, initial_state, cu_seqlens)
    return Prepared(run=run)


FLA_CHUNK = Baseline("fla_chunk_kda", "fla-core 0.6.0 chunk_kda, fused flags, FLA_FLASH_KDA=0", load_fla_chunk_kda,
                     FLA_REQUIREMENT)
FLA_RECURRENT = Baseline("fla_fused_recurrent_kda", "fla-core 0.6.0 fused_recurrent_kda, fused flags",
                         load_fla_fused_recurrent_kda, FLA_REQUIREMENT)
FLASH_KDA = Baseline("flash_kda", "FlashKDA flash_kda.fwd (built from source; widths < 128 zero-padded, state "
                     "V-first, transposed here)", load_flash_kda,
                     "flash_kda (built from source)")
FORWARD_BASELINES: tuple[Baseline, ...] = (FLA_CHUNK, FLA_RECURRENT, FLASH_KDA)
