"""scripts/replay_ranking.py: a run made by today's loop replays to the queues it chose (the replay reads what the
loop ranked with), so a changed queue in an older run is the ranking's change, not the replay's."""

from __future__ import annotations

from pathlib import Path

from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.offline import OfflineAgent
from conftest import SEED
from fake_toolchain import FakeToolchain
from replay_ranking import replay_run

from cake.runs.store import RunStore


def test_todays_run_replays_to_its_own_queues(tmp_path: Path) -> None:
    settings = LoopSettings(turns=3, proposals_per_turn=8, evals_per_turn=2, seed=2)
    store = RunStore.create(tmp_path / "run", {"loop": settings.to_json()})
    EvolutionLoop(store, OfflineAgent(), FakeToolchain(SEED), settings, [SEED]).run()
    turns = replay_run(tmp_path / "run")
    assert [t["turn"] for t in turns] == [1, 2]
    for t in turns:
        assert t["stored_queue"] == t["replayed_queue"] and len(t["stored_queue"]) == 2  # type: ignore[arg-type]
