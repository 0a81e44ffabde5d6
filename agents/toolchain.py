"""What the loop needs from the rest of CAKE, as one small protocol.

The loop proposes, checks, ranks, evaluates and stores; a `Toolchain` does the checking, ranking and
evaluating. `cake.agents.cake_toolchain.CakeToolchain` is the real one (parser, checker, cost model,
lowering, verifier worker, timing protocol); tests may drive the loop with a smaller one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from cake.agents.base import Checked
from cake.ir.nodes import Kernel

from cake.store import Evaluation, FitnessKind, Retime


@dataclass(frozen=True, slots=True)
class EvalJob:
    candidate_id: int
    ir_hash: str
    path: Path  # the candidate's .cake artifact in the run directory
    predicted_ms: float | None


class Toolchain(Protocol):
    op: str  # the contract the schedules implement
    arch: str
    fitness_kind: FitnessKind

    def validate(self, text: str) -> Checked:
        """Parse and statically check `text` (for this arch and backend)."""
        ...

    def predict_ms(self, kernel: Kernel) -> float | None:
        """The cost model's predicted time at the fitness shape; None when it cannot predict."""
        ...

    def devices(self) -> tuple[str, ...]:
        """One entry per evaluation worker ("cpu", or "cuda:0", "cuda:1", ...)."""
        ...

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        """Verify (and on a GPU, time) one candidate in an isolated worker on `device`."""
        ...

    def describe(self) -> str:
        """One plain sentence on how candidates are judged here (said at the start of every run)."""
        ...


@runtime_checkable
class Retimer(Protocol):
    """A toolchain that can time a candidate again in a fresh process (measured fitness only): the loop
    re-times every candidate that becomes the best before reporting it as the best."""

    def retime(self, job: EvalJob, device: str) -> Retime:
        ...
