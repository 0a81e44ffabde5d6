"""Statistics for headline figures: medians over separate processes with a seeded bootstrap interval.

A headline (a kernel's time, or its speedup over the best baseline) is measured in P >= 3 separate processes;
each process times every contestant interleaved, rep by rep (`cake.verifier.timing.measure`), so process p
holds a table of n_p reps x C contestants, one row per rep. The figure is the **median over processes** of a
per-process statistic (a contestant's median, or the best baseline's median over the candidate's).

Its 95% interval is a two-level (hierarchical) percentile bootstrap, written here on numpy and seeded:
each resample draws P processes with replacement, then inside each drawn process n_p reps with replacement
(whole rows, so the pairing of an interleaved rep is kept), recomputes the per-process statistic on the
drawn reps and takes the median over the drawn processes. The interval holds between-process drift (the
~4% flash-kmeans drifts from process to process) as well as the spread inside a process. With P processes
the process level has at most C(2P-1, P) distinct draws (10 for P=3): the interval is honest about what
three processes can say, not narrower than that.

Nothing here times anything: the inputs are samples, so every function is testable with known numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

DEFAULT_RESAMPLES = 4000
DEFAULT_LEVEL = 0.95
_BLOCK = 1024
MIN_PROCESSES = 3  # a headline is the median of at least this many separate processes

# A per-process statistic: medians of shape (R, C) over the contestants (columns) -> (R,) values.
Statistic = Callable[[np.ndarray], np.ndarray]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its bootstrap percentile interval (`level`, e.g. 0.95)."""

    point: float
    low: float
    high: float
    level: float
    resamples: int
    seed: int

    def __post_init__(self) -> None:
        if not self.low <= self.point <= self.high:
            raise ValueError(f"interval [{self.low}, {self.high}] does not hold its point {self.point}")

    def describe(self, fmt: str = ".3f", unit: str = "") -> str:
        pct = round(100 * self.level)
        return f"{self.point:{fmt}}{unit} [{self.low:{fmt}}, {self.high:{fmt}}] ({pct}%)"

    def to_json(self) -> dict[str, float | int]:
        return {"point": self.point, "low": self.low, "high": self.high, "level": self.level,
                "resamples": self.resamples, "seed": self.seed}


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_median(samples: Sequence[float], *, seed: int, resamples: int = DEFAULT_RESAMPLES,
                     level: float = DEFAULT_LEVEL) -> Interval:
    """The median of one set of samples with a seeded percentile-bootstrap interval."""
    data = np.asarray(samples, dtype=np.float64)
    if data.ndim != 1 or data.size == 0:
        raise ValueError("bootstrap_median needs a non-empty 1-D sequence of samples")
    rng = np.random.default_rng(seed)
    draws = data[rng.integers(0, data.size, size=(resamples, data.size))]
    low, high = _percentiles(np.median(draws, axis=1), level)
    point = float(np.median(data))
    return Interval(point, min(low, point), max(high, point), level, resamples, seed)


def process_table(columns: Sequence[Sequence[float]]) -> np.ndarray:
    """One process's samples as an (n reps, C contestants) array; contestants timed interleaved have one
    sample per rep each, so the columns have equal lengths."""
    lengths = {len(c) for c in columns}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"a process table needs non-empty columns of equal length (rep pairs); got {sorted(lengths)}")
    return np.asarray(columns, dtype=np.float64).T


def hierarchical_bootstrap(processes: Sequence[np.ndarray], statistic: Statistic, *, seed: int,
                           resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL) -> Interval:
    """Median over processes of `statistic(per-contestant medians)`, with the two-level bootstrap interval
    (module docstring). `processes[p]` is a (reps, contestants) table; every table has the same columns."""
    if not processes:
        raise ValueError("no processes to bootstrap")
    widths = {t.shape[1] for t in processes}
    if len(widths) != 1:
        raise ValueError(f"processes disagree on the number of contestants: {sorted(widths)}")
    rng = np.random.default_rng(seed)
    n_proc = len(processes)
    point = float(np.median([_on_medians(t, statistic) for t in processes]))
    # per_process[p, r * P + j]: the statistic of process p on its own draw of reps, for the j-th pick of
    # resample r (a process drawn twice in one resample gets two independent draws of its reps)
    per_process = np.stack([_rep_draws(table, statistic, rng, resamples * n_proc) for table in processes])
    picks = rng.integers(0, n_proc, size=(resamples, n_proc))
    slots = np.arange(resamples)[:, None] * n_proc + np.arange(n_proc)[None, :]
    stats = np.median(per_process[picks, slots], axis=1)
    low, high = _percentiles(stats, level)
    return Interval(point, min(low, point), max(high, point), level, resamples, seed)


def geomean(values: Sequence[float]) -> float:
    """The geometric mean of positive values (speedups over shapes): exp of the mean log."""
    if not values:
        raise ValueError("the geomean of no values")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_bootstrap(shapes: Sequence[np.ndarray], statistic: Statistic, *, seed: int,
                      resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL) -> Interval:
    """One process that timed several shapes (`shapes[s]` its (reps, contestants) table at shape s): the geomean
    over the shapes of `statistic(per-contestant medians)` - a workload's multi-shape fitness - with a percentile
    bootstrap that redraws every shape's reps independently (whole rows, keeping each interleaved rep's pairing).
    One process says nothing about drift between processes: this interval is the spread inside it."""
    if not shapes:
        raise ValueError("no shapes to bootstrap")
    rng = np.random.default_rng(seed)
    point = geomean([_on_medians(t, statistic) for t in shapes])
    logs = sum(np.log(_rep_draws(table, statistic, rng, resamples)) for table in shapes)
    low, high = _percentiles(np.exp(logs / len(shapes)), level)
    return Interval(point, min(low, point), max(high, point), level, resamples, seed)


def cluster_bootstrap(groups: Sequence[Sequence[T]], statistic: Callable[[list[T]], float], *, seed: int,
                      resamples: int = 1000, level: float = DEFAULT_LEVEL) -> Interval:
    """`statistic` of every group's members pooled, with a percentile bootstrap that redraws whole groups with
    replacement (their members kept together): for a figure whose units of independent evidence are the groups, not
    the members — e.g. a cost model's rank correlation held out by run, where the timings of one run share its
    machine, its day and its drift. With G groups there are at most C(2G-1, G) distinct draws."""
    if len(groups) < 2 or any(not g for g in groups):
        raise ValueError("a cluster bootstrap needs at least two non-empty groups")
    rng = np.random.default_rng(seed)
    point = statistic([m for g in groups for m in g])
    draws = rng.integers(0, len(groups), size=(resamples, len(groups)))
    values = np.array([statistic([m for gi in row for m in groups[gi]]) for row in draws], dtype=np.float64)
    defined = values[np.isfinite(values)]
    if defined.size == 0:
        raise ValueError("the statistic is undefined (NaN) on every redrawn set of groups: no interval")
    low, high = _percentiles(defined, level)
    return Interval(point, min(low, point), max(high, point), level, resamples, seed)


def _on_medians(table: np.ndarray, statistic: Statistic) -> float:
    """The statistic of one table's per-contestant medians."""
    return float(statistic(np.median(table, axis=0)[None, :])[0])


def _rep_draws(table: np.ndarray, statistic: Statistic, rng: np.random.Generator, draws: int) -> np.ndarray:
    """The statistic on `draws` resamples of the table's reps (whole rows, with replacement): shape (draws,)."""
    rows = rng.integers(0, table.shape[0], size=(draws, table.shape[0]))
    out = np.empty(draws)
    for start in range(0, draws, _BLOCK):  # bounded memory: (block, reps, contestants) at a time
        block = rows[start:start + _BLOCK]
        out[start:start + len(block)] = statistic(np.median(table[block], axis=1))
    return out


def column(index: int) -> Statistic:
    """The statistic 'median time of contestant `index`'."""
    return lambda medians: medians[:, index]


def best_over(candidate: int, baselines: Sequence[int]) -> Statistic:
    """The statistic 'fastest baseline's median / the candidate's median' (a speedup; > 1 beats them all)."""
    cols = list(baselines)
    if not cols:
        raise ValueError("a speedup needs at least one baseline")
    return lambda medians: medians[:, cols].min(axis=1) / medians[:, candidate]


def best_over_the_rest() -> Statistic:
    """`best_over` for tables whose column 0 is the candidate and every other column a baseline, however many:
    one statistic over shapes that kept different numbers of baselines (one the timing protocol retired)."""
    return lambda medians: medians[:, 1:].min(axis=1) / medians[:, 0]


# ---- the typed speedup ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Speedup:
    """A speedup over the best of a named set of baselines, or *undefined* with the reason.

    A baseline that is missing (not installed, no GPU), failed its check, or has no time at the shape makes
    the speedup undefined: it is never computed over the baselines that happened to run. `interval` is None
    for a single measurement (no repetition) and set for a headline over separate processes."""

    value: float | None
    against: tuple[str, ...]
    best_baseline: str | None = None
    undefined: str | None = None
    interval: Interval | None = None
    processes: int = 1

    def __post_init__(self) -> None:
        if (self.value is None) == (self.undefined is None):
            raise ValueError("a Speedup has either a value or the reason it is undefined, never both or neither")

    @property
    def defined(self) -> bool:
        return self.value is not None

    @staticmethod
    def missing(against: Sequence[str], why: str, processes: int = 1) -> Speedup:
        return Speedup(None, tuple(against), undefined=why, processes=processes)

    def describe(self) -> str:
        if self.value is None:
            return f"undefined ({self.undefined})"
        if self.interval is not None:
            return f"{self.interval.describe()}x over {self.best_baseline}"
        return f"{self.value:.3f}x over {self.best_baseline}"

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "against": list(self.against), "best_baseline": self.best_baseline,
                "undefined": self.undefined, "interval": None if self.interval is None else self.interval.to_json(),
                "processes": self.processes}


def speedup_over_best(candidate_ms: float | None, baseline_ms: Mapping[str, float | None],
                      against: Sequence[str], *, candidate_problem: str | None = None,
                      problems: Mapping[str, str] | None = None) -> Speedup:
    """One measurement's speedup: the fastest of `against` over the candidate. Each baseline in `against` must
    have a time (`baseline_ms[name]`); one without (its reason in `problems`, else "no time") makes it undefined."""
    problems = problems or {}
    if not against:
        return Speedup.missing(against, "no baselines named")
    lacking = [name for name in against if baseline_ms.get(name) is None]
    if lacking:
        why = "; ".join(f"baseline {name}: {problems.get(name, 'no time')}" for name in lacking)
        return Speedup.missing(against, why)
    if candidate_ms is None:
        return Speedup.missing(against, f"candidate: {candidate_problem or 'no time'}")
    times = {name: float(baseline_ms[name]) for name in against}  # type: ignore[arg-type]
    best = min(times, key=lambda name: times[name])
    if not (math.isfinite(times[best]) and math.isfinite(candidate_ms) and candidate_ms > 0):
        return Speedup.missing(against, f"non-finite or zero time (candidate {candidate_ms}, {best} {times[best]})")
    return Speedup(times[best] / candidate_ms, tuple(against), best)


# ---- headlines over separate processes ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessSamples:
    """What one process measured: every sample of each timed contestant (rep-paired, in rep order), and for each
    contestant that has no time there, why (not installed, failed its check, refused)."""

    times: Mapping[str, Sequence[float]]
    problems: Mapping[str, str]

    def to_json(self) -> dict[str, object]:
        return {"times_ms": {k: list(v) for k, v in self.times.items()}, "problems": dict(self.problems)}


def _lacking(runs: Sequence[ProcessSamples], names: Sequence[str]) -> str | None:
    for index, run in enumerate(runs):
        for name in names:
            if not run.times.get(name):
                return f"{name} in process {index}: {run.problems.get(name, 'no time')}"
    return None


def headline_time(runs: Sequence[ProcessSamples], name: str, *, seed: int, resamples: int = DEFAULT_RESAMPLES,
                  level: float = DEFAULT_LEVEL) -> Interval | None:
    """The median over processes of `name`'s median time, with its interval; None when a process lacks it."""
    if not runs or _lacking(runs, [name]) is not None:
        return None
    tables = [process_table([run.times[name]]) for run in runs]
    return hierarchical_bootstrap(tables, column(0), seed=seed, resamples=resamples, level=level)


def headline_speedup(runs: Sequence[ProcessSamples], candidate: str, against: Sequence[str], *, seed: int,
                     resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL,
                     min_processes: int = MIN_PROCESSES) -> Speedup:
    """The speedup of `candidate` over the best of `against`, as a headline: the median over >= `min_processes`
    processes of (fastest baseline's median / candidate's median) in that process, with the two-level
    bootstrap interval. Undefined when there are too few processes, or any process lacks a time for the
    candidate or for any baseline in `against` (never computed over the baselines that happened to run)."""
    against = tuple(against)
    if not against:
        return Speedup.missing(against, "no baselines named", len(runs))
    if len(runs) < min_processes:
        return Speedup.missing(against, f"{len(runs)} process(es); a headline needs >= {min_processes}", len(runs))
    lacking = _lacking(runs, [candidate, *against])
    if lacking is not None:
        return Speedup.missing(against, lacking, len(runs))
    names = [candidate, *against]
    if any(len({len(run.times[n]) for n in names}) != 1 for run in runs):
        return Speedup.missing(against, "samples are not rep-paired (unequal counts within a process)", len(runs))
    tables = [process_table([run.times[n] for n in names]) for run in runs]
    interval = hierarchical_bootstrap(tables, best_over(0, range(1, len(names))), seed=seed, resamples=resamples,
                                      level=level)
    typical = {n: float(np.median([np.median(run.times[n]) for run in runs])) for n in against}
    best = min(typical, key=lambda n: typical[n])
    return Speedup(interval.point, against, best, interval=interval, processes=len(runs))
