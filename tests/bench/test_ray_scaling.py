"""scripts/gpu_ray_scaling.py: the scaling arithmetic, and its CPU path end to end (Ray with 1 then 2 CPU
slots, the real evaluator). The multi-GPU figures themselves need a multi-GPU host; tests never assert on a
time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpu_ray_scaling import Trial, efficiency


def test_efficiency_is_the_rate_per_slot_against_the_smallest_trial() -> None:
    trials = [Trial(1, 10, 60.0, {}), Trial(2, 10, 40.0, {}), Trial(4, 10, 15.0, {})]
    assert [round(t.per_minute, 6) for t in trials] == [10.0, 15.0, 40.0]
    assert efficiency(trials) == pytest.approx({1: 1.0, 2: 0.75, 4: 1.0})


@pytest.mark.slow
def test_the_cpu_path_evaluates_every_candidate_at_each_slot_count(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_ray_scaling import main

    monkeypatch.setenv("CAKE_RULES_DIR", str(tmp_path / "no-user-rules"))
    out = tmp_path / "scaling.json"
    assert main(["--device", "cpu", "--slots", "1", "2", "--candidates", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["candidates"] == 2 and [t["slots"] for t in data["trials"]] == [1, 2]
    for t in data["trials"]:
        assert t["evaluations"] == 2 and sum(t["statuses"].values()) == 2 and t["per_minute"] > 0
    assert data["trials"][0]["efficiency"] == pytest.approx(1.0)
