"""fp64 references, output scales and op-aware input structure for kmeans assign and update.

A reference takes the op's inputs in signature order (floats upcast to float64 on the CPU, integers as
int64) and returns one tensor per output; a scale returns the magnitude of the summed terms per output
(see cake.verifier.tolerance). These functions are the meaning of the ops; `contracts.py` binds them.
"""

from __future__ import annotations

import torch
from torch import Tensor


def kmeans_distances(x: Tensor, c: Tensor) -> Tensor:
    """Squared Euclidean distances [B, N, K] in fp64 by the norm expansion |x|^2 - 2 x.c + |c|^2, one
    batched fp64 GEMM. Its cancellation error is ~1e-16 (|x|^2 + |c|^2), about 1e-9 of the fp32 tolerance
    on the same scale (kmeans_assign_scale), so ties and gaps are judged as by the direct form at a
    fraction of its cost (the direct form materializes [B, N, K, D]). Points and centroids holding NaN/Inf
    take the direct form, so non-finite distances are exactly the direct form's (Inf - Inf differs)."""
    xx = (x * x).sum(dim=-1)
    cc = (c * c).sum(dim=-1)
    d = xx[:, :, None] - 2.0 * torch.bmm(x, c.transpose(1, 2)) + cc[:, None, :]
    bad_x = ~torch.isfinite(x).all(dim=-1)
    bad_c = ~torch.isfinite(c).all(dim=-1)
    if bool(bad_x.any()) or bool(bad_c.any()):
        for b in range(x.shape[0]):
            rows = bad_x[b].nonzero()[:, 0]
            cols = bad_c[b].nonzero()[:, 0]
            if rows.numel():
                d[b, rows] = ((x[b, rows, None, :] - c[b, None, :, :]) ** 2).sum(dim=-1)
            if cols.numel():
                d[b, :, cols] = ((x[b, :, None, :] - c[b, None, cols, :]) ** 2).sum(dim=-1)
    return d


def kmeans_assign(x: Tensor, c: Tensor) -> tuple[Tensor]:
    # A NaN distance is never the minimum (documented in the contract); a row with no finite distance
    # gives 0, and the contract accepts any id there. posinf stays +Inf (nan_to_num's default would make
    # it the largest finite double, ranking +Inf below NaN).
    inf = float("inf")
    d = kmeans_distances(x, c).nan_to_num(nan=inf, posinf=inf, neginf=-inf)
    return (d.argmin(dim=-1),)


def kmeans_assign_scale(x: Tensor, c: Tensor) -> tuple[Tensor]:
    # Implementations expand |x|^2 - 2 x.c + |c|^2, whose cancellation error scales with both squared norms.
    xs = (x * x).sum(dim=-1).nan_to_num(0.0, 0.0, 0.0)  # [B, N]
    cs = (c * c).sum(dim=-1).amax(dim=-1, keepdim=True).nan_to_num(0.0, 0.0, 0.0)  # [B, 1]
    return (xs + cs,)


def kmeans_update(x: Tensor, ids: Tensor, c_old: Tensor) -> tuple[Tensor]:
    b, _, d = x.shape
    k = c_old.shape[1]
    index = ids.long()[:, :, None].expand(b, ids.shape[1], d)
    sums = torch.zeros(b, k, d, dtype=x.dtype, device=x.device).scatter_add_(1, index, x)
    counts = torch.zeros(b, k, dtype=x.dtype, device=x.device).scatter_add_(1, ids.long(), torch.ones_like(ids, dtype=x.dtype))
    mean = sums / counts.clamp(min=1)[:, :, None]
    return (torch.where(counts[:, :, None] > 0, mean, c_old),)


def _cluster_sums(values: Tensor, ids: Tensor, k: int) -> Tensor:
    """sum over n with ids[b, n] == k of values[b, n, ...], in fp64 ([B, K, ...])."""
    b, n = ids.shape
    index = ids.long().reshape(b, n, *([1] * (values.dim() - 2))).expand_as(values)
    return torch.zeros(b, k, *values.shape[2:], dtype=torch.float64, device=values.device).scatter_add_(
        1, index, values.double())


def kmeans_update_lengths(x: Tensor, ids: Tensor, c_old: Tensor) -> tuple[Tensor]:
    """Each output row averages its own cluster: the reduction length of c_new[b, k, :] is the size of
    cluster k ([B, K, 1]), not N — an atomic or sorted update sums about N/K terms per centroid."""
    return (_cluster_sums(torch.ones_like(ids, dtype=torch.float64), ids, c_old.shape[1])[..., None],)


def kmeans_update_scale(x: Tensor, ids: Tensor, c_old: Tensor) -> tuple[Tensor]:
    """The mean |x| over each cluster ([B, K, D]): a sum of m terms errs by ~eps sqrt(m) sum|x| (the
    condition-number bound), so its mean errs by eps sqrt(m) mean|x|. The max |x| over every point would
    let one far point of another cluster set the scale of all. An empty cluster sums nothing: 0."""
    k = c_old.shape[1]
    counts = _cluster_sums(torch.ones_like(ids, dtype=torch.float64), ids, k)[..., None]
    return (_cluster_sums(x.abs().nan_to_num(0.0, 0.0, 0.0), ids, k) / counts.clamp(min=1.0),)


def kmeans_assign_structure(inputs: list[Tensor | None], gen: torch.Generator) -> None:
    """Near-ties: duplicate centroids (exact ties) and points placed on a centroid pair's midplane."""
    x, c = inputs[0], inputs[1]
    assert x is not None and c is not None
    k = c.shape[1]
    if k >= 2:
        c[:, 1::2] = c[:, 0:-1:2]  # centroid 2j+1 duplicates 2j: every such argmin is a tie
        # Half of the points sit exactly on centroid 0 plus a tiny nudge: near-ties with its duplicate.
        x[:, ::2] = c[:, :1] + 1e-3 * torch.randn(x[:, ::2].shape, generator=gen, dtype=x.dtype)


def kmeans_update_structure(inputs: list[Tensor | None], gen: torch.Generator) -> None:
    """Empty clusters: ids drawn from the even clusters only, so every odd cluster is empty."""
    ids, c_old = inputs[1], inputs[2]
    assert ids is not None and c_old is not None
    k = c_old.shape[1]
    evens = (k + 1) // 2
    ids.copy_(2 * torch.randint(0, evens, tuple(ids.shape), generator=gen, dtype=ids.dtype))
