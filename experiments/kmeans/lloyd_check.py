"""A whole run of Lloyd iterations checked against an fp64 Lloyd from the same initial centroids.

The run under test is a `step(x, c) -> (ids, c_new)` (our assign then update, or a library's one-iteration
call). The reference is Lloyd in fp64 on the same device: r_0 = c_0 upcast, at iteration t its assignment
ref_ids_t = argmin_k d64(x, r_t[k]) (a NaN distance is never the minimum, as in the assign contract) and its
update the fp64 cluster means (an empty cluster keeps r_t[k], as in the update contract).

**Ties.** At iteration t a point p that the run assigns to j while the reference assigns it to i != j is a
*tie* iff

    d64(x_p, r_t[j]) - d64(x_p, r_t[i]) <= tol_assign(p) + drift_t(p, j) + drift_t(p, i)

where tol_assign(p) is the kmeans_assign contract's tolerance for the run's dtype at (x, r_t) (the bound the
gates judge an argmin by), and drift_t(p, k) = |c_t[k] - r_t[k]| * (|x_p - c_t[k]| + |x_p - r_t[k]|) is an
exact bound on how far the run's own centroids c_t (the inputs of its assign, rounded to its dtype) move that
distance from the reference's: |a|^2 - |b|^2 = (a - b).(a + b) with a = x_p - c_t[k], b = x_p - r_t[k].

**Re-sync after a tie.** When every differing point is a tie, the reference adopts the run's assignment
for its update: r_{t+1} = means of x over ids_t (empty clusters keep r_t[k]). The reference thus follows the
run through each legitimate tie-break, and the next centroids stay comparable instead of diverging.

**Centroids.** c_{t+1} must lie within the kmeans_update contract's tolerance (for the run's dtype, at
(x, ids_t, r_t)) of r_{t+1}, element by element; a NaN/Inf must match the reference's exactly.

**The first failure ends the comparison.** A non-tie difference (or a centroid out of tolerance) is
reported with its iteration, index, values and ratio to the tolerance, and nothing after it is compared:
past it the two trajectories start from different states, so a later difference would say nothing new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from cake.experiments.kmeans import references as ref
from cake.verifier.registry import get_contract
from torch import Tensor

Step = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]  # (x, c) -> (ids, c_new): one Lloyd iteration


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """What iteration t showed: points the run assigned differently from the reference (all ties when it
    passed), the largest gap/tie-band ratio among them, and the centroids' largest error/tolerance ratio."""

    iteration: int
    tie_differences: int
    worst_tie_ratio: float
    centroid_error_ratio: float
    empty_clusters: int

    def to_json(self) -> dict[str, object]:
        return {"iteration": self.iteration, "tie_differences": self.tie_differences,
                "worst_tie_ratio": self.worst_tie_ratio, "centroid_error_ratio": self.centroid_error_ratio,
                "empty_clusters": self.empty_clusters}


@dataclass(frozen=True, slots=True)
class LloydCheck:
    """The outcome of `check_lloyd`: one record per iteration compared; `failure` names the first non-tie
    difference or out-of-tolerance centroid (None: every iteration matched up to ties)."""

    iterations: int  # requested
    dtype: str
    records: tuple[IterationRecord, ...]
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and len(self.records) == self.iterations

    def summary(self) -> str:
        ties = sum(r.tie_differences for r in self.records)
        worst = max((r.centroid_error_ratio for r in self.records), default=0.0)
        head = (f"{len(self.records)}/{self.iterations} iterations match the fp64 Lloyd ({self.dtype}); "
                f"{ties} tie-broken assignment(s) re-synced; worst centroid error {worst:.3g} x tolerance")
        return head if self.failure is None else f"{head}; FAILED: {self.failure}"

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "iterations": self.iterations, "dtype": self.dtype, "failure": self.failure,
                "summary": self.summary(), "records": [r.to_json() for r in self.records]}


def lloyd_step(kernels: Mapping[str, Callable[..., Any]]) -> Step:
    """One iteration of our pipeline: the assign contract's callable, then the update's on its ids."""
    assign, update = kernels["kmeans_assign"], kernels["kmeans_update"]

    def step(x: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        ids = assign(x, c)
        # The update contract takes int64 ids; an int32 assign output is widened (as compose_lloyd does).
        ids = ids if ids.dtype == torch.int64 else ids.long()
        return ids, update(x, ids, c)

    return step


def _dims(x: Tensor, c: Tensor) -> dict[str, int]:
    b, n, d = x.shape
    return {"B": b, "N": n, "K": c.shape[1], "D": d}


def _assign_tolerance(dtype: torch.dtype, x64: Tensor, r: Tensor, ref_ids: Tensor) -> Tensor:
    contract = get_contract("kmeans_assign")
    return contract.tolerance.bound("kmeans_assign", dtype, _dims(x64, r), [x64, r], (ref_ids,), (torch.int64,))[0]


def _update_tolerance(dtype: torch.dtype, x64: Tensor, ids: Tensor, r: Tensor, r_next: Tensor) -> Tensor:
    contract = get_contract("kmeans_update")
    return contract.tolerance.bound("kmeans_update", dtype, _dims(x64, r), [x64, ids, r], (r_next,), (dtype,))[0]


def _where(mask: Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0])


def _judge_assign(t: int, x64: Tensor, c: Tensor, r: Tensor, ids: Tensor, dtype: torch.dtype
                  ) -> tuple[int, float, str | None]:
    """(tie differences, worst gap/band ratio among them, the first non-tie difference or None)."""
    k = r.shape[1]
    if tuple(ids.shape) != tuple(x64.shape[:2]):
        return 0, 0.0, f"iteration {t}: ids of shape {tuple(ids.shape)}, expected {tuple(x64.shape[:2])}"
    if bool(((ids < 0) | (ids >= k)).any()):
        where = _where((ids < 0) | (ids >= k))
        return 0, 0.0, f"iteration {t}: ids{list(where)} = {int(ids[where])} is outside [0, {k})"
    inf = float("inf")
    dist = ref.kmeans_distances(x64, r).nan_to_num(nan=inf, posinf=inf, neginf=-inf)
    ref_ids = dist.argmin(dim=-1)
    differ = ids != ref_ids
    if not bool(differ.any()):
        return 0, 0.0, None
    tol = _assign_tolerance(dtype, x64, r, ref_ids).expand_as(differ)
    bi, ni = differ.nonzero(as_tuple=True)
    j, i = ids[bi, ni], ref_ids[bi, ni]
    xp = x64[bi, ni]
    c64 = c.double()

    def drift(k_: Tensor) -> Tensor:
        moved = (c64[bi, k_] - r[bi, k_]).norm(dim=-1)
        return moved * ((xp - c64[bi, k_]).norm(dim=-1) + (xp - r[bi, k_]).norm(dim=-1))

    gap = dist[bi, ni, j] - dist[bi, ni, i]
    band = tol[bi, ni] + drift(j) + drift(i)
    # A point with no finite distance accepts any id (the assign contract).
    gap = torch.where(torch.isfinite(dist[bi, ni, i]), gap, torch.zeros_like(gap)).nan_to_num(nan=inf)
    ratio = gap / band.clamp_min(torch.finfo(torch.float64).tiny)
    worst = int(ratio.argmax())
    if float(ratio[worst]) > 1.0:
        b_, n_ = int(bi[worst]), int(ni[worst])
        count = int((ratio > 1.0).sum())
        return 0, 0.0, (f"iteration {t}: ids[{b_}, {n_}] = {int(j[worst])} but the fp64 Lloyd's nearest centroid is "
                        f"{int(i[worst])}: distance gap {float(gap[worst]):.6g} > tie band {float(band[worst]):.6g} "
                        f"(assign tolerance + centroid drift); {count} such point(s), not a tie")
    return int(differ.sum()), float(ratio.max()), None


def _judge_centroids(t: int, got: Tensor, want: Tensor, tol: Tensor) -> tuple[float, str | None]:
    if tuple(got.shape) != tuple(want.shape):
        return 0.0, f"iteration {t}: centroids of shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    got64 = got.double()
    want_out = want.to(got.dtype).double()  # overflow into the run's dtype is part of the meaning
    special = ~torch.isfinite(got64) | ~torch.isfinite(want_out)
    same = (torch.isnan(got64) & torch.isnan(want_out)) | (got64 == want_out)
    if bool((special & ~same).any()):
        where = _where(special & ~same)
        return 0.0, (f"iteration {t}: c_new{list(where)} = {float(got64[where])}, the fp64 Lloyd has "
                     f"{float(want_out[where])} (NaN/Inf mismatch)")
    err = torch.where(special, torch.zeros_like(got64), (got64 - want).abs())
    ratio = err / tol.expand_as(err).clamp_min(torch.finfo(torch.float64).tiny)
    worst = float(ratio.max()) if ratio.numel() else 0.0
    if worst > 1.0:
        where = _where(ratio == ratio.max())
        return worst, (f"iteration {t}: c_new{list(where)} = {float(got64[where]):.9g}, the fp64 Lloyd has "
                       f"{float(want[where]):.9g}: error {float(err[where]):.3g} > tolerance "
                       f"{float(tol.expand_as(err)[where]):.3g} ({int((ratio > 1.0).sum())} element(s))")
    return worst, None


def check_lloyd(step: Step, x: Tensor, c0: Tensor, iterations: int) -> LloydCheck:
    """Run `iterations` steps of `step` from `c0` and compare each to the fp64 Lloyd (module docstring)."""
    dtype = x.dtype
    x64 = x.double()
    c, r = c0, c0.double()
    records: list[IterationRecord] = []
    for t in range(iterations):
        ids, c_next = step(x, c)
        ids = ids.long()
        ties, worst_tie, failure = _judge_assign(t, x64, c, r, ids, dtype)
        if failure is not None:
            return LloydCheck(iterations, str(dtype).removeprefix("torch."), tuple(records), failure)
        (r_next,) = ref.kmeans_update(x64, ids, r)  # re-synced: the run's ids, all ties by now
        tol = _update_tolerance(dtype, x64, ids, r, r_next)
        worst_c, failure = _judge_centroids(t, c_next, r_next, tol)
        if failure is not None:
            return LloydCheck(iterations, str(dtype).removeprefix("torch."), tuple(records), failure)
        counts = torch.zeros(r.shape[:2], dtype=torch.int64, device=ids.device).scatter_add_(1, ids, torch.ones_like(ids))
        records.append(IterationRecord(t, ties, worst_tie, worst_c, int((counts == 0).sum())))
        c, r = c_next, r_next
    return LloydCheck(iterations, str(dtype).removeprefix("torch."), tuple(records))


def centroids_shape_and_finite(inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> str | None:
    """The timing protocol's check of a timed Lloyd call (final centroids): the shape of c0 and finite. The
    fp64 Lloyd check (`check_pipeline`) judges the values before timing; ties make a later iterate of two
    correct runs legitimately differ, so the final centroids alone cannot be held to a tolerance."""
    c_new = outputs[0]
    if tuple(c_new.shape) != tuple(inputs[1].shape):
        return f"centroids of shape {tuple(c_new.shape)}, expected {tuple(inputs[1].shape)}"
    if not bool(torch.isfinite(c_new.float()).all()):
        return "non-finite centroids"
    return None


def check_pipeline(kernels: Mapping[str, Callable[..., Any]], inputs: tuple[Any, ...], iterations: int) -> LloydCheck:
    """`Pipeline.check` for the Lloyd iteration: our assign + update against the fp64 Lloyd from `inputs`
    (x, c0: the kmeans_assign contract's inputs)."""
    x, c0 = inputs
    return check_lloyd(lloyd_step(kernels), x, c0, iterations)
