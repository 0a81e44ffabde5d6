"""Clean-start evolve seeds side by side: the best-so-far curve's median and spread across seeds.

    python3 scripts/evolve_seeds.py results/.../evolve_seed1/gpu_evolve.json results/.../evolve_seed2/gpu_evolve.json \
        [--json OUT.json]

Each input is the `gpu_evolve.json` that `scripts/gpu_evolve.py` writes for one seed (fitness: the measured
speedup at the CAKE cell over the best baseline timed in the same process). Prints, per number of timed
candidates, the median, min and max over the seeds of the best fitness so far (a seed that stopped earlier keeps
its last best), then each seed's final best with its re-timed interval and its evaluations to parity per
baseline. Issue 17 asks for at least three seeds; with fewer the table says how many it has.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from cake.runs.report import samples_interval


@dataclass(frozen=True, slots=True)
class Seed:
    label: str
    curve: tuple[float, ...]  # best fitness after 1, 2, ... timed candidates
    best: dict[str, object]
    to_parity: dict[str, object]

    @staticmethod
    def read(path: Path) -> Seed:
        data = json.loads(path.read_text())
        series = data.get("best_series")
        summary = data.get("summary")
        if not isinstance(series, list) or not series or not isinstance(summary, dict):
            raise ValueError(f"{path}: no `best_series` / `summary`: not a gpu_evolve.json of a finished run")
        command = data.get("command", [])
        seed = command[command.index("--seed") + 1] if "--seed" in command else "?"
        # An evaluation that timed nothing (a failed one) before the first timed candidate has no best yet: the curve
        # counts timed candidates, so it starts at the first.
        curve = tuple(float(point["best_fitness"]) for point in sorted(series, key=lambda p: p["evaluations"])
                      if point["best_fitness"] is not None)
        return Seed(f"seed {seed}", curve, _with_interval(dict(summary.get("best") or {}), path.parent / "run"),
                    dict(summary.get("evaluations_to_parity_by_baseline") or {}))


def _with_interval(best: dict[str, object], run_dir: Path) -> dict[str, object]:
    """`best` with its re-timing's interval read again from the run's stored samples where the summary has none
    (before session 25 a baseline the protocol retired left it empty: `cake.runs.report.samples_interval`), marked
    `interval_from` so a reader knows it was not in the run's own summary."""
    retimed = best.get("retimed")
    if not isinstance(retimed, dict) or retimed.get("interval") is not None or not retimed.get("samples"):
        return best
    interval = samples_interval(run_dir / "candidates" / str(retimed["samples"]))
    if interval is None:
        return best
    return {**best, "retimed": {**retimed, "interval": interval, "interval_from": "the run's stored samples"}}


def curve_table(seeds: list[Seed]) -> list[dict[str, float | int]]:
    longest = max(len(s.curve) for s in seeds)
    rows = []
    for i in range(longest):
        values = [s.curve[min(i, len(s.curve) - 1)] for s in seeds]
        rows.append({"evaluations": i + 1, "median": statistics.median(values), "min": min(values),
                     "max": max(values)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="gpu_evolve.json of each seed")
    parser.add_argument("--json", type=Path, help="write the table and the seeds' bests here")
    args = parser.parse_args(argv)
    try:
        seeds = [Seed.read(p) for p in args.runs]
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows = curve_table(seeds)
    print(f"best fitness so far over {len(seeds)} seed(s) ({', '.join(s.label for s in seeds)})"
          + ("" if len(seeds) >= 3 else f": issue 17 asks for 3, {3 - len(seeds)} missing"))
    print(f"{'evaluations':>11}  {'median':>7}  {'min':>7}  {'max':>7}")
    for row in rows:
        print(f"{row['evaluations']:>11}  {row['median']:7.3f}  {row['min']:7.3f}  {row['max']:7.3f}")
    for s in seeds:
        retimed = s.best.get("retimed") if isinstance(s.best.get("retimed"), dict) else {}
        interval = retimed.get("interval") if isinstance(retimed, dict) else None
        recomputed = isinstance(retimed, dict) and bool(retimed.get("interval_from"))
        span = (f" [{interval['low']:.3f}, {interval['high']:.3f}] re-timed"
                + (" (interval from the stored samples)" if recomputed else "")
                if isinstance(interval, dict) else "")
        fitness = s.best.get("fitness", 0.0)
        print(f"{s.label}: best #{s.best.get('id')} {float(fitness) if isinstance(fitness, (int, float)) else 0.0:.3f}x{span} after "
              f"{len(s.curve)} timed; to parity {s.to_parity}")
    if args.json is not None:
        args.json.write_text(json.dumps({"curve": rows, "seeds": [
            {"label": s.label, "curve": s.curve, "best": s.best, "to_parity": s.to_parity} for s in seeds]},
            indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
