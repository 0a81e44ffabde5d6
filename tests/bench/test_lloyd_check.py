"""The fp64 Lloyd check (experiments/kmeans/lloyd_check.py): ties re-synced, real differences reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cake.experiments.kmeans import baselines as fkb
from cake.experiments.kmeans.lloyd_check import check_lloyd, check_pipeline, lloyd_step
from torch import Tensor

ROOT = Path(__file__).resolve().parents[2]
ITERATIONS = 4


def _inputs(seed: int = 0, b: int = 2, n: int = 97, k: int = 19, d: int = 32) -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, n, d, generator=gen)
    c0 = x[:, torch.randperm(n, generator=gen)[:k]].clone()  # initial centroids drawn from the points
    return x, c0


def _last_argmin(x: Tensor, c: Tensor) -> Tensor:
    """The torch assign, but breaking exact ties towards the *largest* index (the reference takes the smallest)."""
    scores = ((x[:, :, None, :].double() - c[:, None, :, :].double()) ** 2).sum(-1)
    k = scores.shape[-1]
    return (k - 1 - scores.flip(-1).argmin(-1)).to(torch.int32)


def test_torch_lloyd_matches_the_fp64_lloyd() -> None:
    x, c0 = _inputs()
    result = check_pipeline({"kmeans_assign": fkb.torch_assign_mm, "kmeans_update": fkb.torch_update_index_add},
                            (x, c0), ITERATIONS)
    assert result.ok, result.summary()
    assert [r.iteration for r in result.records] == list(range(ITERATIONS))
    assert all(r.centroid_error_ratio <= 1.0 for r in result.records)
    assert result.to_json()["ok"] is True


def test_tie_broken_the_other_way_is_a_tie_and_the_reference_resyncs() -> None:
    x, c0 = _inputs(1)
    c0[:, 1] = c0[:, 0]  # duplicate centroids: every point nearest to them is an exact tie
    result = check_lloyd(lloyd_step({"kmeans_assign": _last_argmin, "kmeans_update": fkb.torch_update_index_add}),
                         x, c0, ITERATIONS)
    assert result.ok, result.summary()
    assert result.records[0].tie_differences > 0  # the run took centroid 1 where the reference took 0
    # After re-sync the reference followed the run: centroid 0 is empty on both sides from then on.
    assert result.records[0].empty_clusters >= 1


def test_a_non_tie_difference_stops_the_comparison_and_is_reported() -> None:
    x, c0 = _inputs(2)

    def wrong_at_iteration_two() -> object:
        calls = {"n": 0}

        def assign(x_: Tensor, c: Tensor) -> Tensor:
            ids = fkb.torch_assign_mm(x_, c)
            calls["n"] += 1
            if calls["n"] == 3:  # iteration 2: point (1, 5) goes to its farthest centroid
                far = ((x_[1, 5] - c[1]) ** 2).sum(-1).argmax()
                ids[1, 5] = far
            return ids

        return assign

    result = check_pipeline({"kmeans_assign": wrong_at_iteration_two(), "kmeans_update": fkb.torch_update_index_add},
                            (x, c0), ITERATIONS)
    assert not result.ok
    assert len(result.records) == 2 and result.failure is not None
    assert result.failure.startswith("iteration 2: ids[1, 5]") and "not a tie" in result.failure


def test_centroids_out_of_tolerance_fail_with_the_element() -> None:
    x, c0 = _inputs(3)

    def off_update(x_: Tensor, ids: Tensor, c: Tensor) -> Tensor:
        out = fkb.torch_update_index_add(x_, ids, c)
        out[0, 3, 7] += 1e-3
        return out

    result = check_pipeline({"kmeans_assign": fkb.torch_assign_mm, "kmeans_update": off_update}, (x, c0), ITERATIONS)
    assert not result.ok and result.failure is not None
    assert result.failure.startswith("iteration 0: c_new[0, 3, 7]") and "> tolerance" in result.failure


def test_ids_outside_the_cluster_range_are_reported() -> None:
    x, c0 = _inputs(4)

    def bad(x_: Tensor, c: Tensor) -> Tensor:
        return torch.full(x_.shape[:2], c.shape[1], dtype=torch.int64)

    def keep(x_: Tensor, ids: Tensor, c: Tensor) -> Tensor:  # an update that does not index by the bad ids
        return c.clone()

    result = check_pipeline({"kmeans_assign": bad, "kmeans_update": keep}, (x, c0), 2)
    assert not result.ok and result.failure is not None and "outside [0, 19)" in result.failure


def test_schedules_under_the_interpreter_match_the_fp64_lloyd() -> None:
    """The stand-in update schedule and the hand-written Triton assign, several iterations, fp32, tiny shape."""
    from cake.experiments.kmeans import triton_assign
    from cake.experiments.schedules import load_schedule_file

    update = load_schedule_file(ROOT / "experiments" / "kmeans" / "update_onehot.cake", "triton")
    assign = triton_assign.assign
    x, c0 = _inputs(5, n=61, k=7, d=16)
    result = check_pipeline({"kmeans_assign": assign, "kmeans_update": update}, (x, c0), 3)
    assert result.ok, result.summary()


@pytest.mark.parametrize("iterations", [0, 1])
def test_degenerate_iteration_counts(iterations: int) -> None:
    x, c0 = _inputs(6)
    result = check_pipeline({"kmeans_assign": fkb.torch_assign_mm, "kmeans_update": fkb.torch_update_index_add},
                            (x, c0), iterations)
    assert result.ok and len(result.records) == iterations
