"""fla's and FlashKDA's KDA kernels in the `kda_forward` signature, for `cake verify` / `cake audit`:

    cake verify --op kda_forward --kernel experiments/kda/audit_targets.py:fla_chunk_kda --device cuda
    cake verify --op kda_forward --kernel experiments/kda/audit_targets.py:fla_fused_recurrent_kda --device cuda
    cake verify --op kda_forward --kernel experiments/kda/audit_targets.py:flash_kda --device cuda

Each name loads the workload's baseline (baselines.py) when it is looked up: the wrappers add only the flags
the fused semantics need, so a gate failure is the library's behaviour. Without the library or a GPU the
lookup raises `BaselineUnavailable` naming what is missing, which `cake verify` reports as a load failure;
the file itself imports anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cake.experiments.kda import baselines

TARGETS = {b.name: b for b in baselines.FORWARD_BASELINES}


def __getattr__(name: str) -> Callable[..., Any]:
    if name not in TARGETS:
        raise AttributeError(name)
    return TARGETS[name].load().run
