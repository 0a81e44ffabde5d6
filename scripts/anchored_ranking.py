"""Would the evolve rank its turns better on what it has measured than on the cost model alone? A prequential replay
of the committed evolve runs, held out by run.

    python3 scripts/anchored_ranking.py [RUN_DIR ...] [--json OUT]

Without `anchor_on_parents` the loop ranks a turn's children by the cost model's absolute prediction. With it
(`cake.agents.ranking.measured_rankings`) a child of a measured parent is ranked at

    measured(parent) x predicted(child) / predicted(parent) x exp(surprise of its operator)

so the model says what the move changes, the measurement says where the parent stands, and the run's own timings of
that move's earlier children say how far the model was off about it (`operator_surprises`). This script asks whether
that orders the runs' evaluated candidates better than the absolute prediction, using only what each turn knew:

- predictions: for each run, the factors and learned correction fitted on the OTHER runs of its key (as
  `scripts/fit_cost_model.py` holds out by run; wins kept out of every fit), applied to every candidate of the run;
- prequential: a candidate evaluated in turn t is ranked as the loop ranks it on the candidates measured before t;
- figures per run and pooled over the runs (measured rankings are in each run's milliseconds, so a pool compares
  like with like; absolute predictions are pooled as the fitter pools them): Spearman rho over the candidates
  evaluated after turn 0, the share of same-turn pairs ordered as measured (the choice the queue makes each turn),
  and the gain in pooled rho with a 95% interval from redrawing whole runs.

Default runs: the committed kmeans evolve runs at the current CUDA codegen (the cost fitter's events key). A reading
of committed timings, not a timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import cost_data
import fit_cost_model as fcm
from cake.agents.ranking import Timed, measured_rankings, operator_of
from cake.ir.cost_calibration import spearman

from cake.runs.store import RunStore
from cake.stats import cluster_bootstrap

KEY_SUFFIX = "+events"  # the evolve runs' clock: the key their candidates are fitted under


@dataclass(frozen=True, slots=True)
class Evaluated:
    """An evaluated candidate of a run as the replay reads it: what the loop's ranking reads of it (its prediction
    held out by run) and the turn that evaluated it."""

    turn: int
    timed: Timed


def default_runs() -> list[Path]:
    runs = [cost_data.RESULTS / run for run in cost_data.CODEGEN4_EVOLVE_RUNS]
    return runs + cost_data.recorded_kmeans_evolve_runs()


def held_out_predictions(samples: Sequence[cost_data.Sample]) -> dict[tuple[str, str], float]:
    """(run, IR hash) -> predicted ms from the factors and correction fitted on the other runs of the key."""
    out = {}
    for run in sorted({s.run for s in samples}):
        train = [s for s in samples if s.run != run and not s.kept_out]
        factors, correction = fcm.fit_on(train).factors, fcm.correct_on(train)
        for s in samples:
            if s.run == run:
                out[(run, s.ident)] = fcm.predicted_s(s, factors, correction) * 1e3
    return out


def timed_candidates(run_dir: Path, predicted: Mapping[str, float]) -> list[Evaluated]:
    """Every candidate of the run with a measured time and a prediction (one per IR hash, its first evaluation)."""
    with RunStore.open_read_only(run_dir) as store:
        rows = [r for r in store.candidates() if r.evaluation is not None and r.evaluation.measured_ms is not None]
    out, seen = [], set()
    for row in rows:
        if row.ir_hash in seen or row.ir_hash not in predicted:
            continue
        seen.add(row.ir_hash)
        assert row.evaluation is not None and row.evaluation.measured_ms is not None
        out.append(Evaluated(row.turn, Timed(row.id, operator_of(row.mutation), tuple(row.parents),
                                             float(row.evaluation.measured_ms), predicted[row.ir_hash])))
    return out


def prequential(candidate: Evaluated, evaluated: Sequence[Evaluated]) -> float:
    """The loop's ranking on measurements (`ranking.measured_rankings`) of `candidate`, on what the run had measured
    before its turn."""
    earlier = [t.timed for t in evaluated if t.turn < candidate.turn]
    mine = candidate.timed
    (ranked,) = measured_rankings([(mine.predicted_ms, mine.parents, mine.operator)], earlier)
    assert ranked is not None
    return ranked


def pairs_in_order(turns: Sequence[int], predicted: Sequence[float], measured: Sequence[float]) -> tuple[int, int]:
    """(pairs of the same turn ordered as measured, such pairs) — ties in either count as wrong."""
    right = total = 0
    for i, j in combinations(range(len(turns)), 2):
        if turns[i] != turns[j]:
            continue
        total += 1
        right += (predicted[i] - predicted[j]) * (measured[i] - measured[j]) > 0
    return right, total


def replay(run: str, timed: Sequence[Evaluated]) -> dict[str, Any]:
    by_id = {t.timed.id: t for t in timed}
    tested = sorted((t for t in timed if t.turn > 0), key=lambda t: t.timed.id)
    absolute = [t.timed.predicted_ms for t in tested]
    anchored = [prequential(t, timed) for t in tested]
    measured = [t.timed.measured_ms for t in tested]
    turns = [t.turn for t in tested]
    on_parent = sum(any(p in by_id and by_id[p].turn < t.turn for p in t.timed.parents) for t in tested)
    return {"run": run, "n": len(tested), "anchored_on_a_measured_parent": on_parent,
            "absolute": _figures(turns, absolute, measured), "anchored": _figures(turns, anchored, measured),
            "rows": [{"id": t.timed.id, "turn": t.turn, "measured_ms": t.timed.measured_ms, "absolute_ms": round(a, 4),
                      "anchored_ms": round(b, 4)} for t, a, b in zip(tested, absolute, anchored, strict=True)]}


def _figures(turns: Sequence[int], predicted: Sequence[float], measured: Sequence[float]) -> dict[str, Any]:
    right, total = pairs_in_order(turns, predicted, measured)
    return {"spearman": spearman(predicted, measured) if len(predicted) >= 3 else None,
            "same_turn_pairs_in_order": right, "same_turn_pairs": total}


def pooled(results: Sequence[Mapping[str, Any]], how: str) -> dict[str, Any]:
    rows = [(r["run"], row) for r in results for row in r["rows"]]
    predicted = [row[f"{how}_ms"] for _, row in rows]
    measured = [row["measured_ms"] for _, row in rows]
    right = sum(r[how]["same_turn_pairs_in_order"] for r in results)
    total = sum(r[how]["same_turn_pairs"] for r in results)
    return {"n": len(rows), "spearman": spearman(predicted, measured), "same_turn_pairs_in_order": right,
            "same_turn_pairs": total, "share_in_order": right / total if total else None,
            "median_run_spearman": statistics.median(r[how]["spearman"] for r in results
                                                     if r[how]["spearman"] is not None)}


def rho_gain(rows: list[dict[str, Any]]) -> float:
    """Pooled rho of the anchored ranking minus that of the absolute one over `rows` (NaN under three)."""
    if len(rows) < 3:
        return float("nan")
    measured = [r["measured_ms"] for r in rows]
    return spearman([r["anchored_ms"] for r in rows], measured) - spearman([r["absolute_ms"] for r in rows], measured)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="evolve run directories (default: module docstring)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    runs = args.runs or default_runs()
    try:
        loaded = cost_data.load_sources(runs)
    except cost_data.SourceError as error:
        print(f"anchored_ranking: {error}", file=sys.stderr)
        return 2
    results = []
    for key in sorted({s.key for s in loaded.samples}, key=str):
        samples = [s for s in loaded.samples if s.key == key]
        if not key.toolchain.endswith(KEY_SUFFIX) or len({s.run for s in samples}) < 2:
            continue
        predicted = held_out_predictions(samples)
        for run in sorted({s.run for s in samples}):
            mine = {ident: ms for (r, ident), ms in predicted.items() if r == run}
            timed = timed_candidates(cost_data.RESULTS / run, mine)
            results.append({"key": str(key), **replay(run, timed)})
    if not results:
        print("anchored_ranking: no key of evolve runs with two runs or more", file=sys.stderr)
        return 2
    summary: dict[str, Any] = {how: pooled(results, how) for how in ("absolute", "anchored")}
    summary["gain_over_runs"] = cluster_bootstrap([r["rows"] for r in results if r["rows"]], rho_gain,
                                                  seed=0).to_json()
    print(f"{'run':52} {'n':>3} {'on parent':>9}  {'rho abs':>7} {'rho anc':>7}  {'pairs abs':>9} {'pairs anc':>9}")
    for r in results:
        a, b = r["absolute"], r["anchored"]
        print(f"{r['run'][:52]:52} {r['n']:3} {r['anchored_on_a_measured_parent']:9}  {_fmt(a['spearman']):>7} "
              f"{_fmt(b['spearman']):>7}  {a['same_turn_pairs_in_order']:4}/{a['same_turn_pairs']:<4} "
              f"{b['same_turn_pairs_in_order']:4}/{b['same_turn_pairs']:<4}")
    for how in ("absolute", "anchored"):
        s = summary[how]
        print(f"pooled {how:9} n {s['n']}  rho {s['spearman']:.3f}  median run rho {s['median_run_spearman']:.3f}  "
              f"same-turn pairs in order {s['same_turn_pairs_in_order']}/{s['same_turn_pairs']} "
              f"({s['share_in_order']:.2f})")
    gain = summary["gain_over_runs"]
    print(f"anchored minus absolute pooled rho: {gain['point']:+.3f}, 95% [{gain['low']:+.3f}, {gain['high']:+.3f}] "
          f"redrawing the runs")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"runs": [str(r) for r in runs], "summary": summary, "per_run": results},
                                        indent=1) + "\n")
    return 0


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
