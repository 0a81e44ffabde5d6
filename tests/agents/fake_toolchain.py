"""A toolchain for testing the loop's logic in-process and fast: `cake.agents.model_world.ModelWorld` (the real
validator and cost model, every legal candidate passing with the model's fitness instead of running the gates) at the
CAKE cell, plus a crash on demand and a record of what was evaluated and confirmed.

It is a test double for the verifier worker only; the end-to-end tests run the real `CakeToolchain`.
"""

from __future__ import annotations

from pathlib import Path

from cake.agents.model_world import ModelWorld
from cake.agents.toolchain import EvalJob

from cake.runs.store import Evaluation

CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}


class Interrupted(Exception):
    """Raised by `evaluate` after `crash_after` evaluations: a crash in the middle of a turn."""


class FakeToolchain(ModelWorld):
    def __init__(self, seed_path: Path, crash_after: int | None = None, *, backend: str = "triton",
                 validate_dims: dict[str, int] | None = None):
        # backend/validate_dims: what the validator checks for (budgets proven at those dims when given)
        super().__init__(seed_path, dims=CELL, backend=backend, validate_dims=validate_dims)
        self.crash_after = crash_after
        self.evaluated: list[int] = []
        self.confirmed: list[int] = []  # candidates the loop re-verified before promoting them to best

    def describe(self) -> str:
        return "test toolchain: legal candidates pass; fitness from the cost model"

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        if self.crash_after is not None and len(self.evaluated) >= self.crash_after:
            raise Interrupted(f"crash before evaluating #{job.candidate_id}")
        self.evaluated.append(job.candidate_id)
        assert job.path.is_file()
        return super().evaluate(job, device)

    def confirm(self, job: EvalJob, device: str, evaluation: Evaluation) -> Evaluation:
        self.confirmed.append(job.candidate_id)
        return evaluation
