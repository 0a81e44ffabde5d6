"""A toolchain for testing the loop's logic in-process and fast: the real validator and cost model, and
an evaluation that passes every legal candidate with the model's fitness instead of running the gates.

It is a test double for the verifier worker only; the end-to-end tests run the real `CakeToolchain`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cake.agents.base import Checked
from cake.agents.toolchain import EvalJob
from cake.agents.validation import make_validator
from cake.ir import nodes as n
from cake.ir.cost import CostError, predict
from cake.ir.parser import parse

from cake.runs.store import CandidateStatus, Evaluation, FitnessKind

CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}


class Interrupted(Exception):
    """Raised by `evaluate` after `crash_after` evaluations: a crash in the middle of a turn."""


class FakeToolchain:
    op = "kmeans_assign"
    arch = "sm_90a"
    fitness_kind = FitnessKind.MODEL

    def __init__(self, seed_path: Path, crash_after: int | None = None, *, backend: str = "triton",
                 validate_dims: dict[str, int] | None = None):
        # backend/validate_dims: what the validator checks for (budgets proven at those dims when given)
        self._validate = make_validator(self.arch, backend, dims=validate_dims)
        self.backend = backend
        self.baseline_ms = self.predict_ms(parse(seed_path.read_text()))
        self.crash_after = crash_after
        self.evaluated: list[int] = []
        self.confirmed: list[int] = []  # candidates the loop re-verified before promoting them to best

    def validate(self, text: str) -> Checked:
        return self._validate(text)

    def predict_ms(self, kernel: n.Kernel) -> float | None:
        try:
            # Priced as the backend that validates lowers it, with that backend's calibration (or its priors):
            # a Triton calibration fitted on plain Triton kernels says nothing about warp-specialized schedules
            # only the CUDA backend lowers.
            return predict(kernel, dims=CELL, dtype=n.DType.BF16, arch_name=self.arch, backend=self.backend).time_ms
        except CostError:
            return None

    def predict_many(self, kernels: Sequence[n.Kernel]) -> list[float | None]:
        return [self.predict_ms(k) for k in kernels]

    def devices(self) -> tuple[str, ...]:
        return ("cpu",)

    def describe(self) -> str:
        return "test toolchain: legal candidates pass; fitness from the cost model"

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        if self.crash_after is not None and len(self.evaluated) >= self.crash_after:
            raise Interrupted(f"crash before evaluating #{job.candidate_id}")
        self.evaluated.append(job.candidate_id)
        assert job.path.is_file()
        fitness = self.baseline_ms / job.predicted_ms if self.baseline_ms and job.predicted_ms else None
        return Evaluation(CandidateStatus.PASSED, {"op": self.op, "passed": True, "gates": []}, (),
                          {"predicted_ms": job.predicted_ms or 0.0}, None, self.baseline_ms, fitness,
                          FitnessKind.MODEL, None, device, 0.0)

    def confirm(self, job: EvalJob, device: str, evaluation: Evaluation) -> Evaluation:
        self.confirmed.append(job.candidate_id)
        return evaluation
