"""Replay the loop's queue choice on a stored evolve run's turns with today's ranking (`cake.agents.ranking`) and
today's features, and say which candidates it would have queued instead. A counterfactual of one turn's choice
only: what a changed queue would have measured, and the turns after it, are not known.

    python3 scripts/replay_ranking.py RUN_DIR [RUN_DIR ...] [--json OUT.json] [--repredict static|compiled]
        [--explore-slots N] [--anchor | --no-anchor]

Per turn >= 1: the stored queue (rank < evals_per_turn) and the replayed one, the candidates evaluated in earlier
turns standing in for the run's history (features recomputed from each candidate's IR). Predictions are the stored
ones, or with `--repredict` today's cost model and stored calibration's, through the loop's own toolchain
(`cake.agents.cake_toolchain.Ranker`, for the GPU the run recorded): `static` prices without compiling, `compiled` as a GPU run of the CUDA backend does,
with the spills ptxas reports (nvcc compiles here; slow: every candidate is built). `--explore-slots` replays with
that many exploration places a turn (`ranking.with_exploration`) instead of the run's own; `--anchor` ranks on what the run
had measured (`ranking.measured_rankings`, with the replayed predictions) or `--no-anchor` not, instead of as the run
did.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake.agents.features import features_of
from cake.agents.ranking import Timed, measured_rankings, model_order, operator_of, with_exploration
from cake.ir import nodes as n
from cake.ir.parser import parse

from cake.runs.store import CandidateRow, FitnessKind, RunStore


@dataclass(frozen=True, slots=True)
class Replayed:
    """A stored candidate as today's ranking reads it."""

    id: int
    predicted_ms: float | None
    features: dict[str, Any] = field(default_factory=dict)
    mutation: str = ""

    def label(self) -> str:
        return f"{operator_of(self.mutation)}#{self.id}"


Predictor = Callable[[list[n.Kernel]], list[float | None]]


def replayed(row: CandidateRow, predicted: Mapping[int, float | None] | None = None) -> Replayed:
    """A ranked or evaluated row (its IR parsed when it was stored, so it parses now), at its stored prediction or
    at `predicted[row.id]`."""
    ms = row.predicted_ms if predicted is None else predicted[row.id]
    return Replayed(row.id, ms, features_of(parse(row.ir_text)).to_json(), row.mutation)


def toolchain_predictor(config: Mapping[str, Any], how: str) -> Predictor:
    """The loop's own pricing of a turn's candidates for the run's workload, op, arch, backend and GPU
    (`Ranker.for_run`): `static` without compiling, `compiled` with ptxas's spills (a GPU run of the CUDA
    backend's)."""
    from cake.agents.cake_toolchain import Ranker

    return Ranker.for_run(config, with_compiler=how == "compiled").predict_many


def replay_run(run: Path, repredict: str | None = None, explore_slots: int | None = None,
               anchor: bool | None = None) -> list[dict[str, object]]:
    store = RunStore.open(run)
    config = json.loads((run / "config.json").read_text())
    slots = int(config["loop"]["evals_per_turn"])
    # the run's own exploration places (0 for runs stored before there were any), or the counterfactual's
    explore = int(config["loop"].get("explore_slots", 0)) if explore_slots is None else explore_slots
    anchored = bool(config["loop"].get("anchor_on_parents", False)) if anchor is None else anchor
    rows = store.candidates()
    predicted: dict[int, float | None] | None = None
    if repredict is not None:
        priced = [r for r in rows if r.rank is not None or r.evaluation]
        times = toolchain_predictor(config, repredict)([parse(r.ir_text) for r in priced])
        predicted = {r.id: ms for r, ms in zip(priced, times, strict=True)}
    model = any(r.evaluation and r.evaluation.fitness_kind is FitnessKind.MODEL for r in rows)
    out = []
    for turn in sorted({r.turn for r in rows if r.turn >= 1}):
        evaluated = [replayed(r, predicted) for r in rows if r.turn < turn and r.evaluation]
        legal = [r for r in rows if r.turn == turn and r.rank is not None]
        stored = [replayed(r) for r in sorted(legal, key=lambda r: r.rank or 0)][:slots]
        candidates = [replayed(r, predicted) for r in legal]
        ranking_ms = None
        if anchored and not model:
            timed = [Timed(r.id, operator_of(r.mutation), tuple(r.parents), float(r.evaluation.measured_ms), float(ms))
                     for r in rows if r.turn < turn and r.evaluation and r.evaluation.measured_ms is not None
                     and (ms := r.predicted_ms if predicted is None else predicted[r.id]) is not None]
            ranking_ms = measured_rankings([(c.predicted_ms, r.parents, operator_of(r.mutation))
                                            for c, r in zip(candidates, legal, strict=True)], timed)
        order = model_order(candidates, evaluated, model_fitness=model, ranking_ms=ranking_ms)
        if not model:  # what the loop queues under measured fitness (0 places: runs stored before exploration)
            order = with_exploration(order, candidates, evaluated, slots=slots, explore=explore)
        now = [candidates[i] for i in order[:slots]]
        out.append({"run": str(run), "turn": turn, "stored_queue": [c.label() for c in stored],
                    "replayed_queue": [c.label() for c in now],
                    "timed": [f"#{r.id}" for r in legal if r.evaluation is not None]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--repredict", choices=("static", "compiled"),
                        help="rank with today's cost model and stored calibration instead of the stored predictions")
    parser.add_argument("--explore-slots", type=int, default=None, metavar="N",
                        help="exploration places a turn (default: the run's own; 0 for runs stored before them)")
    parser.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=None,
                        help="rank children on their measured parents (default: as the run did)")
    args = parser.parse_args()
    turns = [t for run in args.runs for t in replay_run(run, args.repredict, args.explore_slots, args.anchor)]
    for t in turns:
        changed = "" if t["stored_queue"] == t["replayed_queue"] else "  <- changed"
        print(f"{t['run']} turn {t['turn']}: stored {' '.join(t['stored_queue'])} | "  # type: ignore[arg-type]
              f"replayed {' '.join(t['replayed_queue'])}{changed}")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(turns, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
