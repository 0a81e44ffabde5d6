"""Export sources: a run's best passed candidates carry their verdicts into the certificate."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake.export import ExportError, from_run
from cake.export.certificate import verdict_summary
from cake.runs.store import CandidateStatus, Evaluation, FitnessKind, NewCandidate, RunStore

PLAIN = (Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / "assign_plain.cake").read_text()
VERDICT = {"op": "kmeans_assign", "passed": True, "refused": [], "gates": [
    {"gate_id": "CMP-01", "status": "PASS", "reason": "", "replay_token": None, "cases_run": 12,
     "dtypes_run": ["float16", "bfloat16"], "dtypes_failed": []},
    {"gate_id": "ORD-02", "status": "PASS", "reason": "", "replay_token": None, "cases_run": 2,
     "dtypes_run": ["bfloat16"], "dtypes_failed": []}]}


def _evaluation(status: CandidateStatus, fitness: float | None) -> Evaluation:
    return Evaluation(status, VERDICT if status is CandidateStatus.PASSED else None, ("tok-1",), {}, 1.0, 1.2,
                      fitness, FitnessKind.MEASURED, None, "w0", 3.0)


def test_from_run_takes_the_best_passed_candidates(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", {"op": "kmeans_assign",
                                               "eval": {"backend": "cuda", "device": "cuda", "seed": 5}})
    texts = [PLAIN.replace("BN = 128", f"BN = {bn}") for bn in (64, 128, 256)]
    ids = store.record_turn(0, [NewCandidate(f"h{i}", t, f"c{i}", (), "offline", "m", CandidateStatus.QUEUED)
                                for i, t in enumerate(texts)], tokens=0)
    store.record_evaluation(ids[0], _evaluation(CandidateStatus.PASSED, 1.10))
    store.record_evaluation(ids[1], _evaluation(CandidateStatus.PASSED, 1.30))
    store.record_evaluation(ids[2], _evaluation(CandidateStatus.FAILED, None))
    store.close()
    found, backend = from_run(tmp_path / "run", [], top=3)
    assert backend == "cuda"
    assert [c.text for c in found] == [texts[1], texts[0]]  # best fitness first, failed ones never
    assert found[0].origin == f"{tmp_path / 'run'}#{ids[1]}" and found[0].seed == 5
    summary = verdict_summary(found[0].verdict, device=found[0].device, seed=found[0].seed,
                              replay_tokens=found[0].replay_tokens)
    assert summary is not None and summary["passed"] and summary["replay_tokens"] == ["tok-1"]
    assert summary["gates"][0] == {"gate": "CMP-01", "status": "PASS", "dtypes_run": ["float16", "bfloat16"],
                                   "dtypes_failed": [], "cases": 12, "refused_cases": 0, "reason": "",
                                   "replay_token": None}
    with pytest.raises(ExportError, match="evolved `kmeans_assign`, not `softmax`"):
        from_run(tmp_path / "run", ["softmax"], top=1)
    with pytest.raises(ExportError, match="not a run directory"):
        from_run(tmp_path, [], top=1)
