"""kmeans_assign's non-finite corner: a point with no finite distance accepts any id, under every seed.

On the H200 the assign kernels' EXC-01 verdict flipped with the seed: a point with a -Inf coordinate has only
NaN and +Inf distances, a running argmin keeps its initial id 0 (a NaN distance), and the scores turned +Inf
into the largest finite double, so that id looked 'wrong'. These tests pin the contract's rule and that the
battery reaches the corner whatever the seed.
"""

from __future__ import annotations

import pytest
import torch
from cake.experiments.kmeans.references import kmeans_distances
from cake.verifier import GateStatus, get_contract, run_gate
from cake.verifier.compare import compare
from cake.verifier.inputs import Layout, ValueFamily, make_case, materialize
from torch import Tensor

SEEDS = range(8)


def running_argmin(x: Tensor, c: Tensor) -> Tensor:
    """A plain running argmin over centroids, as every fused assign kernel computes it: initial best +Inf and
    id 0, replaced only by a strictly smaller distance, so a point with no finite distance keeps id 0."""
    d = ((x.double()[:, :, None, :] - c.double()[:, None, :, :]) ** 2).sum(-1)
    best = torch.full(d.shape[:2], float("inf"), dtype=torch.float64)
    ids = torch.zeros(d.shape[:2], dtype=torch.int64)
    for k in range(d.shape[2]):
        better = d[:, :, k] < best
        best = torch.where(better, d[:, :, k], best)
        ids = torch.where(better, torch.full_like(ids, k), ids)
    return ids


def last_valid_argmin(x: Tensor, c: Tensor) -> Tensor:
    """Picks the last centroid whose distance is not NaN: wrong wherever a finite distance exists."""
    d = ((x.double()[:, :, None, :] - c.double()[:, None, :, :]) ** 2).sum(-1)
    k = torch.arange(d.shape[2]).expand_as(d)
    return torch.where(torch.isnan(d), torch.full_like(k, -1), k).amax(-1).clamp_min(0)


def test_a_point_with_only_nan_and_inf_distances_takes_any_id() -> None:
    contract = get_contract("kmeans_assign")
    case = make_case({"B": 1, "N": 1, "K": 3, "D": 2}, torch.float32, ValueFamily.SPECIAL, Layout.CONTIGUOUS, 0,
                     "EXC-01", 0)
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[[-inf, 0.0]]])
    c = torch.tensor([[[-inf, 0.0], [1.0, 2.0], [3.0, nan]]])  # distances: NaN, +Inf, NaN
    for chosen in range(3):
        assert compare(contract, case, (x, c), (torch.tensor([[chosen]]),)).ok, chosen


def test_a_nan_distance_never_beats_a_finite_one() -> None:
    contract = get_contract("kmeans_assign")
    case = make_case({"B": 1, "N": 1, "K": 2, "D": 2}, torch.float32, ValueFamily.SPECIAL, Layout.CONTIGUOUS, 0,
                     "EXC-01", 0)
    x = torch.tensor([[[0.0, 0.0]]])
    c = torch.tensor([[[float("nan"), 0.0], [1.0, 1.0]]])
    assert not compare(contract, case, (x, c), (torch.tensor([[0]]),)).ok
    assert compare(contract, case, (x, c), (torch.tensor([[1]]),)).ok


@pytest.mark.parametrize("seed", SEEDS)
def test_exc01_reaches_the_all_nonfinite_point_under_every_seed(seed: int) -> None:
    contract = get_contract("kmeans_assign")
    case = make_case(contract.default_dims("cpu"), torch.float32, ValueFamily.SPECIAL_CORNERS,
                     Layout.CONTIGUOUS, seed, "EXC-01", 3)
    x, c = materialize(contract, case, "cpu")
    assert x is not None and c is not None
    d = kmeans_distances(x.double(), c.double())[0, 0]
    assert not bool(torch.isfinite(d).any()) and bool(torch.isnan(d[0])), d


@pytest.mark.parametrize("seed", SEEDS)
def test_running_argmin_passes_exc01_under_every_seed(seed: int) -> None:
    result = run_gate("EXC-01", get_contract("kmeans_assign"), running_argmin, seed=seed)
    assert result.status is GateStatus.PASS, result.reason


def test_exc01_still_catches_a_nan_chosen_over_a_finite_distance() -> None:
    failures = [run_gate("EXC-01", get_contract("kmeans_assign"), last_valid_argmin, seed=s).status
                for s in SEEDS]
    assert all(status is GateStatus.FAIL for status in failures), failures
