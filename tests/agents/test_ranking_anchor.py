"""Ranking on what the run measured (`ranking.measured_rankings`, `LoopSettings.anchor_on_parents`): a child of a timed
parent ranks at the parent's measured time times the model's predicted change, so a lineage the model misprices as a
whole stops being misplaced against other lineages; a child with no timed parent takes the run's median
measured/predicted level; a move whose timed children ran slower than predicted over their parents ranks its next
children that much slower; equivalence to an evaluated candidate is still the model's prediction."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.offline import OfflineAgent
from cake.agents.ranking import SURPRISE_PRIOR, Timed, measured_rankings, model_order, operator_surprises
from conftest import SEED
from fake_toolchain import FakeToolchain

from cake.runs.store import CandidateStatus, Evaluation, FitnessKind, NewCandidate, RunStore


@dataclass(frozen=True)
class Row:
    mutation: str
    predicted_ms: float | None
    features: dict[str, Any] = field(default_factory=dict)


PLAIN = {"grid": "tiles", "copy": "none", "roles": 1, "pingpong": False, "stages": 2, "tile_log2": 13, "warps": 4}
# Parent 1's lineage runs faster than the model says (measured 1.0, predicted 1.2); parent 2's slower (1.2 vs 1.0).
TIMED = [Timed(1, "seed", (), 1.0, 1.2), Timed(2, "seed", (), 1.2, 1.0)]


def test_a_child_ranks_at_its_parents_measured_time_times_the_predicted_change() -> None:
    held_child, other_child = (1.15, (1,), "param"), (0.95, (2,), "param")
    ranking = measured_rankings([held_child, other_child], TIMED)
    assert ranking == pytest.approx([1.15 / 1.2, 0.95 * 1.2])
    turn = [Row("param: a", 1.15), Row("param: b", 0.95)]
    assert model_order(turn, [], model_fitness=False) == [1, 0]  # the absolute prediction
    assert model_order(turn, [], model_fitness=False, ranking_ms=ranking) == [0, 1]


def test_a_child_of_no_timed_parent_takes_the_runs_level_and_an_unpriced_one_stays_unpriced() -> None:
    # the median of 1.0/1.2 and 1.2/1.0; the first parent timed anchors a crossover child; nothing timed: the prediction
    level = (1.0 / 1.2 + 1.2 / 1.0) / 2
    out = measured_rankings([(1.0, (7,), "param"), (1.0, (7, 2), "crossover"), (None, (1,), "param")], TIMED)
    assert out[:2] == pytest.approx([level, 1.2]) and out[2] is None
    assert measured_rankings([(1.0, (1,), "param")], []) == [1.0]
    with pytest.raises(ValueError, match="2 values for 1 candidates"):
        model_order([Row("param: a", 1.0)], [], model_fitness=False, ranking_ms=[1.0, 2.0])


def test_a_move_measured_slower_than_predicted_ranks_its_next_children_slower() -> None:
    # a cluster child predicted 2% faster than its parent ran 23% slower; a param child ran as predicted
    timed = [*TIMED, Timed(3, "cluster", (1,), 1.0 * 1.23, 1.2 * 0.98), Timed(4, "param", (1,), 0.9, 1.2 * 0.9)]
    surprise = operator_surprises(timed)
    expected = math.log(1.23 / 0.98) / (1 + SURPRISE_PRIOR)  # one child: half its log surprise
    assert surprise == pytest.approx({"cluster": expected, "param": 0.0})
    # two children of parent 2, the model pricing the cluster one 2% faster: ranked the other way round now
    ranking = measured_rankings([(0.98, (2,), "cluster"), (1.0, (2,), "param")], timed)
    assert ranking == pytest.approx([0.98 * 1.2 * math.exp(expected), 1.2])
    assert ranking[1] < ranking[0]  # type: ignore[operator]


def test_equivalence_to_an_evaluated_candidate_is_judged_on_the_prediction() -> None:
    # two children anchored to the same time; the one equivalent to an evaluated candidate (same prediction, same
    # features) goes after the one with news, though its anchored time is not the evaluated one's prediction
    evaluated = [Row("seed: x", 1.0, PLAIN)]
    turn = [Row("regs: a", 1.0, PLAIN), Row("param: b", 1.0, {**PLAIN, "stages": 3})]
    assert model_order(turn, evaluated, model_fitness=False, ranking_ms=[0.9, 0.9]) == [1, 0]


class Measured(FakeToolchain):
    """Times every candidate at its prediction, except that a kernel whose text holds `# fast lineage` runs at 60%."""

    fitness_kind = FitnessKind.MEASURED

    def evaluate(self, job: Any, device: str) -> Evaluation:
        fast = "# fast lineage" in Path(job.path).read_text()
        measured = job.predicted_ms * (0.6 if fast else 1.0)
        return Evaluation(CandidateStatus.PASSED, {"op": self.op, "passed": True, "gates": []}, (),
                          {"candidate_ms": measured}, measured, self.baseline_ms, self.baseline_ms / measured,
                          FitnessKind.MEASURED, None, device, 0.0)


def _child(suffix: str, predicted: float, parent: int, *, lineage: str = "") -> NewCandidate:
    return NewCandidate(ir_hash=f"h{suffix}", ir_text=SEED.read_text() + f"\n{lineage}\n# {suffix}\n",
                        name="assign_plain", parents=(parent,), agent="offline", mutation=f"param: {suffix}",
                        status=CandidateStatus.QUEUED, predicted_ms=predicted, features={**PLAIN, "stages": len(suffix)})


@pytest.mark.parametrize("anchor", [False, True])
def test_the_loop_queues_the_child_of_the_lineage_measured_faster_than_predicted(tmp_path: Path, anchor: bool) -> None:
    store = RunStore.create(tmp_path / "run", {})
    loop = EvolutionLoop(store, OfflineAgent(), Measured(SEED), LoopSettings(
        turns=1, proposals_per_turn=4, evals_per_turn=1, seed=0, anchor_on_parents=anchor), [SEED])
    loop.run()  # the seed turn
    seed_id = store.candidates(turn=0)[0].id
    # two parents the model prices alike; one of them runs at 60% of its prediction
    store.record_turn(1, [_child("fast", 2.0, seed_id, lineage="# fast lineage"), _child("plain", 2.0, seed_id)],
                      tokens=0)
    for row in store.candidates(turn=1):
        store.record_evaluation(row.id, Measured(SEED).evaluate(loop._job(row), "cpu"))
    store.finish_turn(1)
    fast, plain = (next(r.id for r in store.candidates(turn=1) if r.ir_hash == h) for h in ("hfast", "hplain"))
    # a child of each: the plain lineage's is predicted 10% faster than the fast lineage's
    ranked = loop._rank([replace_status(_child("of_fast", 1.1, fast)), replace_status(_child("of_plain", 1.0, plain))],
                        seeds=False, turn=2)
    queued = [c.mutation for c in ranked if c.status is CandidateStatus.QUEUED]
    assert queued == (["param: of_fast"] if anchor else ["param: of_plain"])
    assert [c.predicted_ms for c in ranked] == [1.1, 1.0]  # the model's prediction is what is stored
    # each ranked turn leaves what the timings said about each move in the run's events
    logged = [json.loads(detail) for _, _, detail in store.events("surprises")]
    assert logged == ([{"turn": 2, "operators": {"param": pytest.approx(math.log(0.6) / 3, abs=1e-4)}}] if anchor else [])


def replace_status(candidate: NewCandidate) -> NewCandidate:
    from dataclasses import replace

    return replace(candidate, status=CandidateStatus.NOT_SELECTED)


def test_the_prequential_replay_ranks_each_turn_on_earlier_turns_only() -> None:
    import anchored_ranking as ar

    # the seed (turn 0), two parents in turn 1 the model prices alike, their children in turn 2: the first
    # lineage ran at 60% of its prediction, so its child, predicted 10% slower, is measured faster
    timed = [ar.Evaluated(0, Timed(1, "seed", (), 2.0, 2.0)), ar.Evaluated(1, Timed(2, "param", (1,), 1.2, 2.0)),
             ar.Evaluated(1, Timed(3, "stages", (1,), 2.0, 2.0)), ar.Evaluated(2, Timed(4, "hold", (2,), 0.66, 1.1)),
             ar.Evaluated(2, Timed(5, "regs", (3,), 1.0, 1.0))]
    out = ar.replay("run", timed)
    assert out["n"] == 4 and out["anchored_on_a_measured_parent"] == 4
    rows = {r["id"]: r for r in out["rows"]}
    # turn 1 knows only the seed (measured as predicted); turn 2 ranks on turn 1's parents and moves
    assert rows[2]["anchored_ms"] == rows[2]["absolute_ms"] == 2.0
    assert rows[4]["anchored_ms"] == pytest.approx(1.1 * 1.2 / 2.0)  # no earlier `hold` child: no surprise
    assert (out["absolute"]["same_turn_pairs_in_order"], out["anchored"]["same_turn_pairs_in_order"]) == (0, 1)
    assert out["anchored"]["same_turn_pairs"] == 2  # one pair in each turn; the turn-1 pair is tied: wrong both ways
