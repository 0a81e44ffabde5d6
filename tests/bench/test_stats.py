"""Headline statistics on known samples and on a scripted clock: the bootstrap interval, medians over
processes, the shuffled interleave, and the typed speedup that is undefined when a baseline is missing.

No real time is measured: every sample is scripted, so each expected figure is computed by hand here.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from cake.verifier.timing import Contestant, TimingConfig, Verification, measure

from cake.stats import (
    Interval,
    ProcessSamples,
    Speedup,
    best_over,
    bootstrap_median,
    geomean_bootstrap,
    headline_speedup,
    headline_time,
    hierarchical_bootstrap,
    process_table,
    speedup_over_best,
)


class ScriptedClock:
    """Device time advances only when a scripted kernel says so; the call order is logged."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[str] = []

    def record(self) -> object:
        return self.now

    def elapsed_ms(self, start: object, end: object) -> float:
        assert isinstance(start, float) and isinstance(end, float)
        return end - start

    def wait(self, mark: object) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        pass

    def wall_s(self) -> float:
        return 0.0


def scripted(clock: ScriptedClock, name: str, ms: Callable[[int], float]) -> Callable[..., Any]:
    count = [0]

    def run(x: torch.Tensor) -> torch.Tensor:
        count[0] += 1
        clock.calls.append(name)
        clock.now += ms(count[0])
        return x + 1

    return run


def plus_one(inputs: tuple[Any, ...], outputs: tuple[torch.Tensor, ...]) -> str | None:
    return None if torch.equal(outputs[0], inputs[0] + 1) else "not x + 1"


PASSED = Verification(True, "test", "scripted")
INPUTS = [(torch.tensor([0.0]),), (torch.tensor([1.0]),)]


def one_process(index: int, reps: int = 21) -> ProcessSamples:
    """A process in which the candidate takes 1.0 + 0.05 * index ms, `fast` 1.5 ms and `slow` 3 ms, each with a
    small per-call wobble; its order is shuffled with the process's own seed."""
    clock = ScriptedClock()

    def wobble(call: int) -> float:
        return 0.01 * (call % 5)

    contestants = [
        Contestant("cand", scripted(clock, "cand", lambda c: 1.0 + 0.05 * index + wobble(c)), verification=PASSED),
        Contestant("fast", scripted(clock, "fast", lambda c: 1.5 + wobble(c)), candidate=False),
        Contestant("slow", scripted(clock, "slow", lambda c: 3.0 + wobble(c)), candidate=False),
    ]
    config = TimingConfig(warmup_calls=0, min_reps=reps, max_reps=reps, cold_l2=False, shuffle_seed=index)
    samples = measure(contestants, INPUTS, clock, plus_one, config)
    return ProcessSamples({s.name: s.times_ms for s in samples}, {})


# ---- the bootstrap on known samples ---------------------------------------------------------------------------


def test_bootstrap_of_constant_samples_is_the_constant() -> None:
    interval = bootstrap_median([2.5] * 40, seed=0, resamples=500)
    assert (interval.point, interval.low, interval.high) == (2.5, 2.5, 2.5)


def test_bootstrap_median_of_1_to_101_matches_the_order_statistics() -> None:
    # The exact 95% interval for the median of 101 samples spans ranks ~41..61 (binomial(101, 1/2)); the
    # percentile bootstrap lands near those ranks.
    interval = bootstrap_median(range(1, 102), seed=3, resamples=4000)
    assert interval.point == 51.0
    assert 38 <= interval.low <= 46 and 56 <= interval.high <= 64
    assert interval.level == 0.95 and interval.describe(".1f").startswith("51.0 [")


def test_bootstrap_is_seeded() -> None:
    data = [1.0, 1.2, 0.9, 1.4, 1.1, 1.3, 0.8]
    assert bootstrap_median(data, seed=7) == bootstrap_median(data, seed=7)
    assert bootstrap_median(data, seed=7).to_json()["seed"] == 7


def test_interval_must_hold_its_point() -> None:
    with pytest.raises(ValueError, match="does not hold"):
        Interval(2.0, 0.0, 1.0, 0.95, 10, 0)


def test_hierarchical_bootstrap_of_identical_processes_is_their_value() -> None:
    tables = [process_table([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]) for _ in range(3)]
    interval = hierarchical_bootstrap(tables, best_over(0, [1]), seed=0, resamples=200)
    assert (interval.point, interval.low, interval.high) == (2.0, 2.0, 2.0)


def test_hierarchical_interval_spans_the_drift_between_processes() -> None:
    # Three processes whose candidate medians are 1.0, 1.1 and 1.2 (no spread inside a process): the point is the
    # middle one and the interval reaches toward both others, since a resample may draw any process twice.
    tables = [process_table([[m] * 9]) for m in (1.0, 1.1, 1.2)]
    interval = hierarchical_bootstrap(tables, lambda medians: medians[:, 0], seed=1, resamples=2000)
    assert interval.point == pytest.approx(1.1)
    assert interval.low == pytest.approx(1.0) and interval.high == pytest.approx(1.2)


def test_process_table_needs_rep_paired_columns() -> None:
    with pytest.raises(ValueError, match="equal length"):
        process_table([[1.0, 2.0], [1.0]])


# ---- headlines on a scripted clock ----------------------------------------------------------------------------


def test_headline_over_three_scripted_processes() -> None:
    runs = [one_process(i) for i in range(3)]
    speedup = headline_speedup(runs, "cand", ["fast", "slow"], seed=0, resamples=2000)
    per_process = [statistics.median(r.times["fast"]) / statistics.median(r.times["cand"]) for r in runs]
    assert speedup.defined and speedup.best_baseline == "fast" and speedup.processes == 3
    assert speedup.value == pytest.approx(statistics.median(per_process))
    assert speedup.interval is not None
    assert min(per_process) - 0.02 <= speedup.interval.low <= speedup.value <= speedup.interval.high
    assert speedup.interval.high <= max(per_process) + 0.02
    time = headline_time(runs, "cand", seed=0, resamples=500)
    assert time is not None and time.point == pytest.approx(statistics.median(
        [statistics.median(r.times["cand"]) for r in runs]))
    assert speedup.to_json()["interval"] == speedup.interval.to_json()


def test_the_shuffled_order_is_seeded_and_varies_between_reps() -> None:
    clock = ScriptedClock()
    names = ["a", "b", "c", "d"]
    contestants = [Contestant(n, scripted(clock, n, lambda c: 1.0), candidate=False) for n in names]
    config = TimingConfig(warmup_calls=0, min_reps=6, max_reps=6, cold_l2=False, shuffle_seed=5)

    def orders() -> list[tuple[str, ...]]:
        clock.calls.clear()
        measure(contestants, INPUTS, clock, plus_one, config)
        timed = clock.calls[len(names) * len(INPUTS):]  # after the checking calls
        return [tuple(timed[i:i + len(names)]) for i in range(0, len(timed), len(names))]

    first = orders()
    assert first == orders()  # same seed, same orders
    assert all(sorted(o) == names for o in first) and len(set(first)) > 1


def test_measurement_json_keeps_every_sample() -> None:
    run = one_process(0, reps=5)
    assert len(run.times["cand"]) == 5 and run.to_json()["times_ms"]["cand"] == list(run.times["cand"])


# ---- undefined speedups ---------------------------------------------------------------------------------------


def test_a_missing_baseline_makes_the_headline_undefined() -> None:
    runs = [one_process(i) for i in range(3)]
    runs[1] = ProcessSamples({k: v for k, v in runs[1].times.items() if k != "fast"},
                             {"fast": "not installed: pip install fast"})
    speedup = headline_speedup(runs, "cand", ["fast", "slow"], seed=0)
    assert not speedup.defined and speedup.value is None and speedup.interval is None
    assert speedup.undefined == "fast in process 1: not installed: pip install fast"
    assert speedup.describe().startswith("undefined (fast in process 1")
    assert speedup.to_json()["value"] is None


def test_fewer_than_three_processes_is_not_a_headline() -> None:
    speedup = headline_speedup([one_process(0), one_process(1)], "cand", ["fast"], seed=0)
    assert not speedup.defined and "needs >= 3" in str(speedup.undefined)


def test_single_measurement_speedup_is_over_the_best_and_undefined_without_one() -> None:
    ok = speedup_over_best(1.0, {"fk": 1.5, "hand": 1.4, "torch": 20.0}, ["fk", "hand", "torch"])
    assert ok.value == pytest.approx(1.4) and ok.best_baseline == "hand"
    gone = speedup_over_best(1.0, {"fk": 1.5, "hand": None}, ["fk", "hand"], problems={"hand": "wrong before timing"})
    assert gone.value is None and gone.undefined == "baseline hand: wrong before timing"
    assert speedup_over_best(None, {"fk": 1.5}, ["fk"], candidate_problem="refused").undefined == "candidate: refused"


def test_a_speedup_is_either_a_value_or_a_reason() -> None:
    with pytest.raises(ValueError):
        Speedup(1.2, ("fk",), "fk", undefined="both")
    with pytest.raises(ValueError):
        Speedup(None, ("fk",))
    assert np.isclose(Speedup(1.25, ("fk",), "fk").value or 0.0, 1.25)


def test_geomean_bootstrap_is_the_geomean_over_shapes_with_each_shapes_reps_redrawn() -> None:
    rng = np.random.default_rng(3)
    # candidate twice as fast as the baseline at one shape, half as fast at the other: geomean parity
    fast = process_table([list(1.0 + 0.01 * rng.standard_normal(50)), list(2.0 + 0.01 * rng.standard_normal(50))])
    slow = process_table([list(4.0 + 0.01 * rng.standard_normal(50)), list(2.0 + 0.01 * rng.standard_normal(50))])
    interval = geomean_bootstrap([fast, slow], best_over(0, [1]), seed=0, resamples=500)
    assert interval.low <= interval.point <= interval.high and abs(interval.point - 1.0) < 0.01
    assert interval.high - interval.low < 0.02
    one = geomean_bootstrap([fast], best_over(0, [1]), seed=0, resamples=500)
    assert one.point == hierarchical_bootstrap([fast], best_over(0, [1]), seed=0, resamples=500).point
    with pytest.raises(ValueError, match="no shapes"):
        geomean_bootstrap([], best_over(0, [1]), seed=0)


def test_a_cluster_bootstrap_redraws_whole_groups() -> None:
    from cake.stats import cluster_bootstrap

    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    # groups that agree give no spread however many members they have; groups that differ do
    same = cluster_bootstrap([[1.0, 1.0, 1.0], [1.0], [1.0, 1.0]], mean, seed=0, resamples=200)
    assert (same.point, same.low, same.high) == (1.0, 1.0, 1.0)
    spread = cluster_bootstrap([[0.0] * 10, [1.0] * 10], mean, seed=0, resamples=400)
    assert spread.point == 0.5 and spread.low == 0.0 and spread.high == 1.0  # all of one group in some draws
    assert cluster_bootstrap([[0.0] * 10, [1.0] * 10], mean, seed=0, resamples=400) == spread  # seeded
    # a statistic undefined on a draw (NaN) leaves that draw out instead of the interval
    nan_small = cluster_bootstrap([[1.0], [2.0, 3.0]], lambda xs: mean(xs) if len(xs) > 1 else float("nan"), seed=1,
                                  resamples=200)
    assert 1.0 <= nan_small.low <= nan_small.point == 2.0 <= nan_small.high <= 3.0
    with pytest.raises(ValueError, match="two non-empty groups"):
        cluster_bootstrap([[1.0]], mean, seed=0)
