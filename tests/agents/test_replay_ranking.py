"""scripts/replay_ranking.py: a run made by today's loop replays to the queues it chose (the replay reads what the
loop ranked with), so a changed queue in an older run is the ranking's change, not the replay's."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.offline import OfflineAgent
from cake.ir import nodes as n
from cake.ir.parser import parse
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


def test_repredicted_at_the_stored_prices_the_run_replays_to_its_own_queues(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # --repredict prices every ranked or evaluated candidate through the loop's toolchain once; priced as the run
    # priced them, the queues are the run's own (so a changed queue under today's model is the model's change).
    import replay_ranking
    from cake.ir.printer import print_kernel

    settings = LoopSettings(turns=3, proposals_per_turn=8, evals_per_turn=2, seed=2)
    store = RunStore.create(tmp_path / "run", {"loop": settings.to_json()})
    EvolutionLoop(store, OfflineAgent(), FakeToolchain(SEED), settings, [SEED]).run()
    rows = [r for r in store.candidates() if r.rank is not None or r.evaluation]
    stored_price = {print_kernel(parse(r.ir_text)): r.predicted_ms for r in rows}
    calls: list[int] = []

    def predictor_for(config: object, how: str) -> replay_ranking.Predictor:
        assert how == "static"

        def predict_many(kernels: list[n.Kernel]) -> list[float | None]:
            calls.append(len(kernels))
            return [stored_price[print_kernel(k)] for k in kernels]
        return predict_many

    monkeypatch.setattr(replay_ranking, "toolchain_predictor", predictor_for)
    turns = replay_run(tmp_path / "run", "static")
    assert calls == [len(rows)]
    for t in turns:
        assert t["stored_queue"] == t["replayed_queue"]
