"""The distiller's calibration targets load into samples for one (device, toolchain), skipping the rest with
reasons. (The fitter reads the run stores themselves, which hold every evaluation the targets list.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake.agents import distiller
from cake.agents.distiller import CALIBRATION_TARGETS, record_mispredictions
from cake.experiments.kmeans.shapes import CAKE_CELL
from cake.ir.cost_calibration import MeasuredSample, load_calibration_targets

from cake.runs.store import CandidateStatus, Evaluation, FitnessKind, NewCandidate, RunStore, ir_hash

SCHEDULES = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
TOOLCHAIN = "triton-3.6.0+torch-2.11.0"


def _run(root: Path, arch: str, names: tuple[str, ...], monkeypatch: pytest.MonkeyPatch,
         device: str = "H200") -> Path:
    """A run whose every candidate was measured 4x faster than predicted on `device` with TOOLCHAIN; the
    distiller's writer records them (the measuring machine is patched: this one has no GPU)."""
    monkeypatch.setattr(distiller, "_measuring_machine", lambda: (device, TOOLCHAIN))
    store = RunStore.create(root, {"arch": arch, "op": "kmeans_assign", "dims": dict(CAKE_CELL.dim_map),
                                   "dtype": "bf16"})
    texts = [(SCHEDULES / name).read_text() for name in names]
    ids = store.record_turn(1, [NewCandidate(ir_hash(t), t, name, (), "offline", "mutate", CandidateStatus.QUEUED,
                                             predicted_ms=8.0) for t, name in zip(texts, names, strict=True)],
                            tokens=0)
    for i in ids:
        store.record_evaluation(i, Evaluation(CandidateStatus.PASSED, None, (), {}, 2.0, 1.5, 0.75,
                                              FitnessKind.MEASURED, None, "cuda:0", 1.0))
    store.finish_turn(1)
    assert record_mispredictions(store) == len(names)
    store.close()
    return root / CALIBRATION_TARGETS


def test_targets_load_into_samples_and_mismatches_are_skipped_with_reasons(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h200 = _run(tmp_path / "h200", "sm_90a", ("assign_plain.cake", "assign_pingpong.cake"), monkeypatch)
    a100 = _run(tmp_path / "a100", "sm_80", ("assign_cp_async.cake",), monkeypatch, device="A100-SXM4-80GB")
    # A record without a toolchain (written before the distiller recorded one) is skipped by strict loading.
    unrecorded = tmp_path / "h200" / "unrecorded.jsonl"
    unrecorded.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "toolchain"}) + "\n"
                                  for line in h200.read_text().splitlines()))
    strict = load_calibration_targets([unrecorded], device="H200", toolchain=TOOLCHAIN)
    assert not strict.samples and strict.skip_counts() == {"toolchain": 2}
    loaded = load_calibration_targets([h200, a100], device="H200", toolchain=TOOLCHAIN)
    assert len(loaded.samples) == 2 and all(isinstance(s, MeasuredSample) for s in loaded.samples)
    assert {s.measured_ms for s in loaded.samples} == {2.0}
    assert all(s.prediction.time_s > 0 and s.schedule.startswith("h200/candidate ") for s in loaded.samples)
    [skip] = loaded.skipped
    assert skip.source == f"{a100}:1" and skip.reason.startswith("device: the record is for A100")
    # A record that names another toolchain is skipped even when unrecorded ones are accepted.
    record = json.loads(h200.read_text().splitlines()[0])
    other = tmp_path / "h200" / "other.jsonl"
    other.write_text(json.dumps({**record, "toolchain": "triton-3.9.0+torch-2.13.0"}) + "\n")
    mixed = load_calibration_targets([other], device="H200", toolchain=TOOLCHAIN, unrecorded_toolchain_ok=True)
    assert not mixed.samples and "triton-3.9.0" in mixed.skipped[0].reason
