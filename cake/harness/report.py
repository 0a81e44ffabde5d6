"""`cake experiment report DIR`: an experiment's runs, aggregated per arm across seeds.

* Curves: the best fitness so far against evaluations, tokens and wall time; per arm the median across seeds
  with the interquartile band (each run's best-so-far is a step function, read on a common grid).
* The final table: per arm, the median final best with a seeded bootstrap 95% interval across seeds
  (`cake.stats.bootstrap_median`), and the median evaluations, tokens and wall time.
* Files: `curves.csv` (one row per evaluation of every run), `runs.csv` (one row per run), `arms.csv` (one
  row per arm), `best_so_far.png`, `report.md`.

`cake experiment report RUN_DIR RUN_DIR ...` does the same over separate `cake evolve` run directories (runs
of different days, seeds or machines: issue 17's reproducibility), grouped into arms by op and backend, each
run's seed read from its config.

Runs are opened read-only; a run with no verified candidate yet has no best (counted, never a zero).
Wall time is the time from a run's first proposal to each evaluation's commit, so a run killed and resumed
later counts its pause.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cake.harness.runner import RUNS, SPEC_NAME
from cake.harness.spec import ExperimentSpec, load_spec
from cake.runs.store import DB_NAME, RunStore
from cake.stats import Interval, bootstrap_median

PLOT = "best_so_far.png"
GRID_POINTS = 200
BOOTSTRAP_SEED = 0


@dataclass(frozen=True, slots=True)
class Point:
    evaluation: int  # 1-based, in candidate order
    candidate_id: int
    status: str
    fitness: float | None
    best: float | None  # best fitness so far (None: nothing verified yet)
    tokens: int  # tokens spent up to this evaluation's turn
    wall_s: float


@dataclass(frozen=True, slots=True)
class RunData:
    name: str
    arm: str
    seed: int
    fitness_kind: str | None
    stop: str | None
    points: tuple[Point, ...]

    @property
    def best(self) -> float | None:
        return self.points[-1].best if self.points else None


@dataclass(frozen=True, slots=True)
class ArmSummary:
    arm: str
    runs: int
    with_best: int  # runs that verified at least one candidate
    best: Interval | None
    evaluations: float
    tokens: float
    wall_s: float


def load_run(root: Path, arm: str, seed: int) -> RunData:
    store = RunStore.open_read_only(root)
    try:
        turns = store.turns()
        tokens_through: dict[int, int] = {}
        total = 0
        for t in turns:
            total += t.tokens
            tokens_through[t.turn] = total
        start = min((t.proposed_at for t in turns), default=0.0)
        times = store.evaluation_times()
        points: list[Point] = []
        best: float | None = None
        for c in store.candidates():
            if c.evaluation is None:
                continue
            if c.fitness is not None and (best is None or c.fitness > best):
                best = c.fitness
            points.append(Point(len(points) + 1, c.id, c.status.value, c.fitness, best,
                                tokens_through.get(c.turn, total), max(0.0, times[c.id] - start)))
        kinds = {c.evaluation.fitness_kind.value for c in store.candidates()
                 if c.evaluation and c.evaluation.fitness_kind}
        events = store.events()
        stop = events[-1][2] if events and events[-1][1] == "stop" else None
    finally:
        store.close()
    return RunData(root.name, arm, seed, kinds.pop() if len(kinds) == 1 else None, stop, tuple(points))


def load_experiment(out: Path) -> tuple[ExperimentSpec, list[RunData]]:
    spec = load_spec(out / SPEC_NAME)
    runs = []
    for run in spec.runs():
        root = out / RUNS / run.name
        if (root / DB_NAME).is_file():
            runs.append(load_run(root, run.arm, run.seed))
    return spec, runs


def best_at(xs: Sequence[float], fitness: Sequence[float | None], grid: np.ndarray) -> np.ndarray:
    """The best fitness among the evaluations with x <= each grid point (NaN before the first verified one):
    a right-continuous step function, whatever order the evaluations finished in along x."""
    out = np.full(grid.shape, np.nan)
    for x, y in sorted((x, y) for x, y in zip(xs, fitness, strict=True) if y is not None):
        reached = grid >= x
        out[reached] = np.fmax(out[reached], y)
    return out


def band(runs: Sequence[RunData], axis: str, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median and quartiles across runs of best-so-far on `grid` (`axis`: evaluation | tokens | wall_s);
    at a grid point only the runs that have a best there count."""
    table = np.vstack([best_at([getattr(p, axis) for p in r.points], [p.fitness for p in r.points], grid)
                       for r in runs])
    defined = ~np.all(np.isnan(table), axis=0)
    q = np.full((3, grid.size), np.nan)
    if defined.any():
        q[:, defined] = np.nanpercentile(table[:, defined], [25, 50, 75], axis=0)
    return q[1], q[0], q[2]


def summarize(arm: str, runs: Sequence[RunData]) -> ArmSummary:
    bests = [r.best for r in runs if r.best is not None]
    interval = bootstrap_median(bests, seed=BOOTSTRAP_SEED) if bests else None

    def median(values: list[float]) -> float:
        return float(np.median(values)) if values else math.nan

    return ArmSummary(arm, len(runs), len(bests), interval, median([len(r.points) for r in runs]),
                      median([r.points[-1].tokens for r in runs if r.points]),
                      median([r.points[-1].wall_s for r in runs if r.points]))


def arms_of(spec: ExperimentSpec, runs: Sequence[RunData]) -> dict[str, list[RunData]]:
    order = list(dict.fromkeys(r.arm for r in spec.runs()))
    return {arm: [r for r in runs if r.arm == arm] for arm in order if any(r.arm == arm for r in runs)}


def write_report(out: Path, dest: Path | None = None) -> list[Path]:
    """Aggregate the experiment in `out`; write CSVs, the plot and report.md to `dest` (default out/report)."""
    spec, runs = load_experiment(out)
    header = (f"{len(runs)} of {len(spec.runs())} runs present, {sum(r.stop is None for r in runs)} unfinished; "
              f"seeds {list(spec.seeds)}; arms over {', '.join(k for k, _ in spec.grid) or 'nothing (one arm)'}.")
    return _write(dest or out / "report", f"Experiment {spec.name}", header, runs, arms_of(spec, runs))


def run_arm(config: dict[str, Any]) -> str:
    """The arm a standalone run belongs to: its op and backend (runs of one search, whatever day they ran)."""
    evaluation = config.get("eval", {})
    parts = [config.get("op"), evaluation.get("backend"), config.get("agent")]
    return "/".join(str(p) for p in parts if p) or "runs"


def load_runs(roots: Sequence[Path]) -> list[RunData]:
    """Separate run directories, each with its arm (`run_arm`) and its seed from its config (the position in
    `roots` when the config has none)."""
    runs = []
    for i, root in enumerate(roots):
        store = RunStore.open_read_only(root)
        try:
            config = store.config
        finally:
            store.close()
        seed = config.get("loop", {}).get("seed", config.get("eval", {}).get("seed", i))
        runs.append(load_run(root, run_arm(config), int(seed)))
    return runs


def write_runs_report(roots: Sequence[Path], dest: Path) -> list[Path]:
    """Aggregate separate `cake evolve` run directories into `dest`, as `write_report` does an experiment."""
    runs = load_runs(roots)
    arms: dict[str, list[RunData]] = {}
    for run in runs:
        arms.setdefault(run.arm, []).append(run)
    header = (f"{len(runs)} run directories, {sum(r.stop is None for r in runs)} unfinished; "
              f"seeds {sorted({r.seed for r in runs})}; arms by op, backend and agent.")
    return _write(dest, "Runs " + ", ".join(r.name for r in runs), header, runs, arms)


def _write(dest: Path, title: str, header: str, runs: Sequence[RunData], arms: dict[str, list[RunData]]) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    summaries = [summarize(arm, rs) for arm, rs in arms.items()]
    written = [_curves_csv(dest, runs), _runs_csv(dest, runs), _arms_csv(dest, summaries), _plot(dest, title, arms)]
    written.append(_markdown(dest, title, header, runs, summaries))
    return written


def _curves_csv(dest: Path, runs: Sequence[RunData]) -> Path:
    path = dest / "curves.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "arm", "seed", "evaluation", "candidate_id", "status", "fitness", "best_so_far",
                    "tokens", "wall_s"])
        for r in runs:
            for p in r.points:
                w.writerow([r.name, r.arm, r.seed, p.evaluation, p.candidate_id, p.status, _num(p.fitness),
                            _num(p.best), p.tokens, f"{p.wall_s:.3f}"])
    return path


def _runs_csv(dest: Path, runs: Sequence[RunData]) -> Path:
    path = dest / "runs.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "arm", "seed", "evaluations", "best", "fitness_kind", "tokens", "wall_s", "stop"])
        for r in runs:
            last = r.points[-1] if r.points else None
            w.writerow([r.name, r.arm, r.seed, len(r.points), _num(r.best), r.fitness_kind or "",
                        last.tokens if last else 0, f"{last.wall_s:.3f}" if last else "", r.stop or "unfinished"])
    return path


def _arms_csv(dest: Path, summaries: Sequence[ArmSummary]) -> Path:
    path = dest / "arms.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arm", "runs", "runs_with_best", "best_median", "best_low", "best_high", "level",
                    "evaluations_median", "tokens_median", "wall_s_median"])
        for s in summaries:
            b = s.best
            w.writerow([s.arm, s.runs, s.with_best, _num(b.point if b else None), _num(b.low if b else None),
                        _num(b.high if b else None), b.level if b else "", s.evaluations, s.tokens,
                        f"{s.wall_s:.3f}"])
    return path


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _plot(dest: Path, title: str, arms: dict[str, list[RunData]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = {r.fitness_kind for rs in arms.values() for r in rs if r.fitness_kind}
    ylabel = "best speedup so far" + (" (cost-model prediction)" if kinds == {"model"} else "")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, axis, xlabel in zip(axes, ("evaluation", "tokens", "wall_s"), ("evaluations", "tokens", "wall time (s)"),
                                strict=True):
        top = max((getattr(p, axis) for rs in arms.values() for r in rs for p in r.points), default=0)
        if not top:
            ax.text(0.5, 0.5, f"no {xlabel} recorded" + (" (offline agent)" if axis == "tokens" else ""),
                    ha="center", va="center", transform=ax.transAxes)
        else:
            grid = np.linspace(0, top, GRID_POINTS) if axis != "evaluation" else np.arange(1, top + 1, dtype=float)
            for arm, rs in arms.items():
                med, low, high = band(rs, axis, grid)
                line = ax.step(grid, med, where="post", label=f"{arm} (n={len(rs)})")[0]
                ax.fill_between(grid, low, high, step="post", alpha=0.2, color=line.get_color())
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ax.legend(fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel, fontsize=8)
    fig.suptitle(f"{title}: median across seeds, interquartile band", fontsize=10)
    fig.tight_layout()
    path = dest / PLOT
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _markdown(dest: Path, title: str, header: str, runs: Sequence[RunData], summaries: Sequence[ArmSummary]) -> Path:
    kinds = {r.fitness_kind for r in runs if r.fitness_kind}
    lines = [f"# {title}", "", header, ""]
    if kinds == {"model"}:
        lines += ["Fitness is the cost model's predicted speedup (no GPU: fitness_kind=model), not a timing.", ""]
    lines += ["| arm | runs | verified | final best: median [95% bootstrap] | evaluations | tokens | wall s |",
              "|---|---|---|---|---|---|---|"]
    for s in summaries:
        best = s.best.describe(".3f", "x") if s.best else "— (nothing verified)"
        lines.append(f"| {s.arm} | {s.runs} | {s.with_best} | {best} | {s.evaluations:g} | {s.tokens:g} | "
                     f"{s.wall_s:.1f} |")
    lines += ["", f"![best so far]({PLOT})", "",
              "Medians across seeds; the interval resamples the runs' final bests (seeded, "
              f"{summaries[0].best.resamples if summaries and summaries[0].best else 0} resamples). "
              "Data: curves.csv, runs.csv, arms.csv.", ""]
    path = dest / "report.md"
    path.write_text("\n".join(lines))
    return path
