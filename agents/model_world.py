"""A toolchain whose only judge is the cost model: every candidate the checker accepts passes, and its fitness is the
seed's predicted time over its own. No kernel runs and no gate is applied, so nothing it reports is a kernel's
speed or correctness: it is for studying what the search does given the model (`scripts/model_world_search.py`)
and for testing the loop's logic in-process. `cake evolve` never uses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cake.agents.base import Checked
from cake.agents.toolchain import EvalJob
from cake.agents.validation import make_validator
from cake.ir import nodes as n
from cake.ir.cost import CostError, predict
from cake.ir.parser import parse

from cake.runs.store import CandidateStatus, Evaluation, FitnessKind


class ModelWorld:
    """The `Toolchain` of the module docstring for one workload op: candidates are checked for `arch` and `backend`
    (resource budgets proven at `validate_dims` when given) and priced at `dims`, bf16, with the backend's stored
    calibration (the fit of `clock`'s timings when one is on file; no clock: the kernel-only fit)."""

    fitness_kind = FitnessKind.MODEL

    def __init__(self, seed: Path, *, dims: Mapping[str, int], op: str = "kmeans_assign", arch: str = "sm_90a",
                 backend: str = "triton", validate_dims: Mapping[str, int] | None = None, clock: str | None = None):
        self.op, self.arch, self.backend = op, arch, backend
        self.dims, self.clock = dict(dims), clock
        self._validate = make_validator(arch, backend, dims=dict(validate_dims) if validate_dims else None)
        # the seed's predicted time: every candidate's fitness is taken over it
        self.baseline_ms = self.predict_ms(parse(seed.read_text(), seed.name))

    def validate(self, text: str) -> Checked:
        return self._validate(text)

    def predict_ms(self, kernel: n.Kernel) -> float | None:
        try:
            # Priced as the backend that validates lowers it, with that backend's calibration (or its priors): a
            # Triton calibration fitted on plain Triton kernels says nothing about warp-specialized schedules only
            # the CUDA backend lowers.
            return predict(kernel, dims=self.dims, dtype=n.DType.BF16, arch_name=self.arch, backend=self.backend,
                           clock=self.clock).time_ms
        except CostError:
            return None

    def predict_many(self, kernels: Sequence[n.Kernel]) -> list[float | None]:
        return [self.predict_ms(k) for k in kernels]

    def devices(self) -> tuple[str, ...]:
        return ("cpu",)

    def describe(self) -> str:
        return "the cost model's world: legal candidates pass, fitness is the predicted speedup over the seed"

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        fitness = self.baseline_ms / job.predicted_ms if self.baseline_ms and job.predicted_ms else None
        return Evaluation(CandidateStatus.PASSED, {"op": self.op, "passed": True, "gates": []}, (),
                          {"predicted_ms": job.predicted_ms or 0.0}, None, self.baseline_ms, fitness,
                          FitnessKind.MODEL, None, device, 0.0)

    def confirm(self, job: EvalJob, device: str, evaluation: Evaluation) -> Evaluation:
        return evaluation
