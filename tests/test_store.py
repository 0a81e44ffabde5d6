"""The run store: round trips, one transaction per turn and per evaluation, no repeated evaluation."""

import json
import sqlite3

import pytest

from cake.runs.store import (
    CandidateStatus,
    Evaluation,
    FitnessKind,
    NewCandidate,
    NotARunError,
    RunExistsError,
    RunStore,
    ir_hash,
)


def _cand(text: str, status: CandidateStatus, **kw) -> NewCandidate:
    return NewCandidate(ir_hash=ir_hash(text), ir_text=text, name="k", parents=kw.pop("parents", ()), agent="offline",
                        mutation="param: BN 128->64", status=status, **kw)


def _eval(status: CandidateStatus = CandidateStatus.PASSED, fitness: float | None = 1.2) -> Evaluation:
    return Evaluation(status=status, verdict={"op": "kmeans_assign", "passed": True, "gates": []},
                      replay_tokens=(), timings={"predicted_ms": 1.0}, measured_ms=None, baseline_ms=None,
                      fitness=fitness, fitness_kind=FitnessKind.MODEL, error=None, worker="cpu", seconds=0.5)


def test_round_trip_and_order(tmp_path) -> None:
    store = RunStore.create(tmp_path / "run", {"op": "kmeans_assign", "seed": 3})
    diag = {"code": "E0301", "severity": "error", "message": "smem"}
    ids = store.record_turn(0, [
        _cand("a", CandidateStatus.QUEUED, predicted_ms=1.5, rank=0, features={"grid": "tiles"}),
        _cand("b", CandidateStatus.REJECTED, diagnostics=(diag,)),
        _cand("c", CandidateStatus.NOT_SELECTED, parents=(1,), tokens=7),
    ], tokens=7, agent_notes=("note",))
    assert ids == [1, 2, 3]
    store.record_evaluation(ids[0], _eval())
    store.finish_turn(0)
    store.close()

    again = RunStore.open(tmp_path / "run")
    assert again.config == {"op": "kmeans_assign", "seed": 3}
    rows = again.candidates()
    assert [r.ir_text for r in rows] == ["a", "b", "c"]
    assert rows[0].status is CandidateStatus.PASSED and rows[0].fitness == 1.2
    assert rows[0].evaluation is not None and rows[0].evaluation.fitness_kind is FitnessKind.MODEL
    assert rows[1].diagnostics[0]["code"] == "E0301" and rows[1].evaluation is None
    assert rows[2].parents == (1,) and rows[2].tokens == 7
    (turn,) = again.turns()
    assert turn.rejections == {"E0301": 1} and turn.n_rejected == 1 and turn.finished_at is not None
    assert turn.agent_notes == ("note",)
    assert again.total_tokens() == 7 and again.evaluation_count() == 1
    assert (tmp_path / "run" / "candidates" / f"{ir_hash('a')}.cake").read_text() == "a"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["seed"] == 3
    assert sqlite3.connect(tmp_path / "run" / "run.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_finished_evaluation_cannot_be_recorded_twice(tmp_path) -> None:
    store = RunStore.create(tmp_path / "run", {})
    (cid,) = store.record_turn(0, [_cand("a", CandidateStatus.QUEUED)], tokens=0)
    store.record_evaluation(cid, _eval())
    with pytest.raises(sqlite3.IntegrityError):
        store.record_evaluation(cid, _eval(CandidateStatus.FAILED, None))
    assert store.candidate(cid).status is CandidateStatus.PASSED


def test_a_turn_is_written_whole_or_not_at_all(tmp_path) -> None:
    store = RunStore.create(tmp_path / "run", {})
    store.record_turn(0, [_cand("a", CandidateStatus.QUEUED)], tokens=0)
    with pytest.raises(sqlite3.IntegrityError):  # turn 0 again: the second write must leave nothing behind
        store.record_turn(0, [_cand("b", CandidateStatus.QUEUED)], tokens=0)
    assert [r.ir_text for r in store.candidates()] == ["a"]


def test_create_refuses_an_existing_run_and_open_refuses_a_plain_dir(tmp_path) -> None:
    RunStore.create(tmp_path / "run", {}).close()
    with pytest.raises(RunExistsError):
        RunStore.create(tmp_path / "run", {})
    with pytest.raises(NotARunError):
        RunStore.open(tmp_path)


def test_reading_a_run_whose_evaluations_never_left_its_log_says_so(tmp_path) -> None:
    # a run database copied without its `-wal` holds no tables: reading it is refused with why, not a SQL error
    (tmp_path / "run").mkdir()
    sqlite3.connect(tmp_path / "run" / "run.sqlite").execute("PRAGMA user_version = 0").connection.close()
    with pytest.raises(NotARunError, match="write-ahead log"):
        RunStore.open_read_only(tmp_path / "run")
