"""`ScheduleEvaluator.retime` and the samples kept beside a candidate, with the bench worker scripted: the
speedup is over the best baseline, undefined (with the reason) when one has no time, and every sample of
the worker's run is kept as `<hash>.bench.json` / `<hash>.retime.json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cake.evaluation import evaluator as ev
from cake.evaluation.bench import BenchRequest, BenchTimes
from cake.evaluation.evaluator import EvalSettings, ScheduleEvaluator
from cake.evaluation.executors import InProcessExecutor, LocalPoolExecutor
from cake.evaluation.protocol import EvalJob, Retimer
from cake.runs.store import CandidateStatus, Evaluation

SHAPE = "cake_cell"
RUN = {"shapes": [{"shape": {"name": SHAPE}, "measurements": [{"name": "candidate", "candidate": True,
                                                               "times_ms": [1.0, 1.1, 0.9]}]}]}


def _evaluator() -> ScheduleEvaluator:
    return ScheduleEvaluator(op="kmeans_assign", workload="flash_kmeans", arch="sm90",
                             settings=EvalSettings(device="cuda", backend="triton", seed=0),
                             against=("triton_assign", "flash_kmeans", "torch_mm"))


def _script(monkeypatch: pytest.MonkeyPatch, times: BenchTimes | str | None) -> list[str]:
    devices: list[str] = []

    def worker(request: BenchRequest, device: str, *, timeout_s: float, verdict_cache: str | None = None,
               keep: Path | None = None, reuse: bool = False,
               started_ahead: bool = False) -> tuple[BenchTimes | str | None, str]:
        assert not reuse, "a re-timing is measured in a fresh bench process, never on the shared bench server"
        assert started_ahead, "a run on bench servers re-times in a fresh process started ahead"
        devices.append(device)
        if keep is not None and isinstance(times, BenchTimes):
            keep.write_text(json.dumps(RUN))
        return times, "tail"

    monkeypatch.setattr(ev, "run_bench_worker", worker)
    return devices


def _job(tmp_path: Path) -> EvalJob:
    path = tmp_path / "abc.cake"
    path.write_text("schedule")
    return EvalJob(3, "abc", path, None)


def test_retime_is_over_the_best_baseline_and_keeps_its_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    times = BenchTimes({SHAPE: 0.5}, {"triton_assign": {SHAPE: 0.6}, "flash_kmeans": {SHAPE: 0.8},
                                      "torch_mm": {SHAPE: 2.0}})
    devices = _script(monkeypatch, times)
    evaluator = _evaluator()
    assert isinstance(evaluator, Retimer)
    retime = evaluator.retime(_job(tmp_path), "cuda:1")
    assert devices == ["cuda:1"]
    assert retime.fitness == pytest.approx(0.6 / 0.5) and retime.baseline_ms == 0.6 and retime.measured_ms == 0.5
    assert retime.error is None and retime.samples == "abc.retime.json"
    assert json.loads((tmp_path / "abc.retime.json").read_text())["shapes"][0]["measurements"][0]["times_ms"]


def test_retime_is_undefined_with_the_reason_when_a_baseline_has_no_time(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    times = BenchTimes({SHAPE: 0.5}, {"triton_assign": {SHAPE: 0.6}, "torch_mm": {SHAPE: 2.0}},
                       {"flash_kmeans": "not available: flash-kmeans is not installed"})
    _script(monkeypatch, times)
    retime = _evaluator().retime(_job(tmp_path), "cuda")
    assert retime.fitness is None and retime.baseline_ms is None
    assert retime.error is not None and "flash_kmeans" in retime.error and "not installed" in retime.error


def test_retime_without_a_result_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _script(monkeypatch, None)
    retime = _evaluator().retime(_job(tmp_path), "cuda")
    assert retime.fitness is None and retime.samples is None
    assert retime.error is not None and "no result" in retime.error and "tail" in retime.error


class _Scripted:
    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        return Evaluation(CandidateStatus.PASSED, None, (), {}, None, None, 1.0, None, None, device, 0.0)


def test_completed_jobs_name_the_device_they_ran_on(tmp_path: Path) -> None:
    job = _job(tmp_path)
    inline = InProcessExecutor(_Scripted(), "cuda:0")
    inline.submit(job)
    assert [(c.job, c.device) for c in inline.collect()] == [(job, "cuda:0")]
    pool = LocalPoolExecutor(_Scripted(), ["cuda:1"])
    try:
        pool.submit(job)
        done = pool.collect()
    finally:
        pool.close()
    assert [(c.job, c.device, c.evaluation.worker) for c in done] == [(job, "cuda:1", "cuda:1")]
