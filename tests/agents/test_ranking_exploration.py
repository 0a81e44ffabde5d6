"""`ranking.with_exploration`: under measured fitness, a turn's last places go to operators the run has never timed,
best-ranked first and one per operator, so a move the cost model ranks below its parent is measured once; at least
one place stays the model's, and nothing changes where every operator of the turn has been timed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cake.agents.ranking import model_order, with_exploration


@dataclass(frozen=True)
class Row:
    mutation: str
    predicted_ms: float | None
    features: dict[str, Any] = field(default_factory=dict)


TURN = [Row("param: BK 64->128", 1.00), Row("param: BN 128->256", 1.01), Row("stages: 2->3", 1.02),
        Row("param: STAGES 2->3", 1.03), Row("cluster: multicast cs", 1.10), Row("hold: xs", 1.20),
        Row("cluster: multicast cs, csq", 1.05)]
TIMED = [Row("seed: assign_plain.cake", 2.0), Row("param: BK 32->64", 1.5), Row("stages: 1->2", 1.4)]


def _queue(explore: int, slots: int = 4, timed: list[Row] = TIMED) -> list[str]:
    order = with_exploration(model_order(TURN, timed, model_fitness=False), TURN, timed, slots=slots, explore=explore)
    return [TURN[i].mutation for i in order[:slots]]


def test_the_model_order_is_kept_without_exploration() -> None:
    assert _queue(0) == ["param: BK 64->128", "param: BN 128->256", "stages: 2->3", "param: STAGES 2->3"]


def test_the_last_place_goes_to_the_best_ranked_operator_never_timed() -> None:
    # cluster's better child (1.05) before its other one, and before hold (1.20)
    assert _queue(1) == ["param: BK 64->128", "param: BN 128->256", "stages: 2->3", "cluster: multicast cs, csq"]
    assert _queue(2) == ["param: BK 64->128", "param: BN 128->256", "cluster: multicast cs, csq", "hold: xs"]


def test_at_least_one_place_stays_the_models() -> None:
    assert _queue(4) == _queue(3) == ["param: BK 64->128", "cluster: multicast cs, csq", "hold: xs", "param: BN 128->256"]
    assert _queue(1, slots=1) == ["param: BK 64->128"]


def test_where_every_operator_was_timed_the_places_stay_the_models() -> None:
    timed = [*TIMED, Row("cluster: multicast cs", 1.3), Row("hold: xs", 1.3)]
    assert _queue(2, timed=timed) == _queue(0, timed=timed)
