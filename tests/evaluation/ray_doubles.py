"""Evaluators for the executor tests that a Ray worker can import (this folder is on the workers' PYTHONPATH):
frozen dataclasses of plain values, like the real `ScheduleEvaluator`.

They stand in for the verifier worker only — the candidates, checks and ranking are the real ones — so that the
executor's own behaviour (order, retries, timeouts) is what the tests see.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from cake.evaluation.protocol import EvalJob
from cake.runs.store import CandidateStatus, Evaluation, FitnessKind


@dataclass(frozen=True, slots=True)
class ModelEvaluator:
    """Every candidate passes with the cost model's speedup over `baseline_ms`; earlier candidates take
    longer, so a pool of several slots finishes them out of submission order."""

    baseline_ms: float
    delay_s: float = 0.02

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        assert job.path.is_file(), job.path
        time.sleep(self.delay_s * (job.candidate_id % 3))
        fitness = self.baseline_ms / job.predicted_ms if job.predicted_ms else None
        verdict = {"op": "kmeans_assign", "passed": True, "gates": [], "text_bytes": len(job.path.read_bytes())}
        return Evaluation(CandidateStatus.PASSED, verdict, (), {"predicted_ms": job.predicted_ms or 0.0}, None,
                          self.baseline_ms, fitness, FitnessKind.MODEL, None, device, 0.0)


@dataclass(frozen=True, slots=True)
class DiesOnce:
    """Like `ModelEvaluator`, but the first attempt at candidate `victim` writes its worker's pid to
    `marker` and waits to be killed; a later attempt (the marker exists) evaluates normally."""

    inner: ModelEvaluator
    victim: int
    marker: str

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        marker = Path(self.marker)
        if job.candidate_id == self.victim and not marker.exists():
            partial = marker.with_suffix(".tmp")
            partial.write_text(str(os.getpid()))
            partial.replace(marker)
            time.sleep(120)  # the test kills this process long before
            raise AssertionError("the worker was not killed")
        return self.inner.evaluate(job, device)


@dataclass(frozen=True, slots=True)
class Hangs:
    """Candidate `victim` never finishes (a hung kernel whose own timeout failed); others are quick."""

    inner: ModelEvaluator
    victim: int

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        if job.candidate_id == self.victim:
            time.sleep(600)
        return self.inner.evaluate(job, device)


class Crash(Exception):
    """A bug of the evaluation machinery (it propagates: the run stops, to be resumed)."""


@dataclass(frozen=True, slots=True)
class CrashesAt:
    """Like `ModelEvaluator`, but raises `Crash` for candidate `victim`."""

    inner: ModelEvaluator
    victim: int

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        if job.candidate_id == self.victim:
            raise Crash(f"crash at #{job.candidate_id}")
        return self.inner.evaluate(job, device)
