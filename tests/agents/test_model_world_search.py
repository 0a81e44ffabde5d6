"""`scripts/model_world_search.py`: a clean-start search judged by the cost model alone, reported as the evaluation at
which it first holds a schedule predicted as fast as each hand-written mark, with the best's lineage."""

from __future__ import annotations

import model_world_search as mws


def test_one_turn_of_the_model_world_reports_the_marks_the_lineage_and_the_params() -> None:
    world = mws.model_world()
    assert world.baseline_ms is not None
    marks = {"slow": world.baseline_ms * 10, "impossible": 1e-9}
    result = mws.search(0, 1, world, marks)
    assert result["evaluated"] == 5  # the seed and one turn's four
    # the seed itself is at least as fast as a mark ten times its time; nothing reaches a nanosecond
    assert result["first_evaluation_at_least_as_fast_as"] == {"slow": 1, "impossible": None}
    assert result["best_predicted_ms"] <= world.baseline_ms
    assert result["best_turn"] in (0, 1) and len(result["lineage"]) == result["best_turn"]
    assert {"BN", "BK"} <= set(result["params"])
