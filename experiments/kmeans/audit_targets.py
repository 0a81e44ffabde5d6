"""flash-kmeans 0.3.1's kernels wrapped in CAKE's op signatures, for `cake verify` / `cake audit`:

    cake verify --op kmeans_assign --kernel experiments/kmeans/audit_targets.py:flash_kmeans_assign --device cuda
    cake verify --op kmeans_update --kernel experiments/kmeans/audit_targets.py:flash_kmeans_update --device cuda

The wrappers add only what the library's API asks its caller to supply (the squared norms, computed in
fp32 as its own `batch_kmeans_Euclid` does), so a gate failure is the library's behaviour, not ours.
"""

from __future__ import annotations

import torch
from flash_kmeans.assign_euclid_triton import euclid_assign_triton
from flash_kmeans.centroid_update_triton import triton_centroid_update_sorted_euclid


def flash_kmeans_assign(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    x_sq = (x.float() ** 2).sum(-1)
    c_sq = (c.float() ** 2).sum(-1)
    return euclid_assign_triton(x, c, x_sq, c_sq=c_sq)


def flash_kmeans_update(x: torch.Tensor, ids: torch.Tensor, c_old: torch.Tensor) -> torch.Tensor:
    out = triton_centroid_update_sorted_euclid(x, ids, c_old)
    return out[0] if isinstance(out, tuple) else out
