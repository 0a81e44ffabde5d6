"""What the loop needs from the rest of CAKE, as one small protocol.

The loop proposes, checks, ranks, evaluates and stores; a `Toolchain` does the checking and ranking, and
is the evaluator an `Executor` (cake.evaluation) runs. `cake.agents.cake_toolchain.CakeToolchain` is the real one (parser, checker, cost model,
lowering, verifier worker, timing protocol); tests may drive the loop with a smaller one. A toolchain that
is also a `Retimer` (cake.evaluation.protocol) times a candidate again in a fresh process: with measured
fitness the loop re-times every candidate that becomes the best before reporting it as the best.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cake.agents.base import Checked
from cake.ir.nodes import Kernel

from cake.evaluation.protocol import EvalJob, Retimer
from cake.runs.store import Evaluation, FitnessKind

__all__ = ["EvalJob", "Retimer", "Toolchain"]


class Toolchain(Protocol):
    op: str  # the contract the schedules implement
    arch: str
    backend: str  # the lowering backend candidates are checked for and lowered by ("triton", "cuda")
    fitness_kind: FitnessKind

    def validate(self, text: str) -> Checked:
        """Parse and statically check `text` (for this arch and backend)."""
        ...

    def predict_ms(self, kernel: Kernel) -> float | None:
        """The cost model's predicted time at the fitness shape; None when it cannot predict."""
        ...

    def predict_many(self, kernels: Sequence[Kernel]) -> list[float | None]:
        """`predict_ms` for each of a turn's candidates (a toolchain may compile them together first)."""
        ...

    def devices(self) -> tuple[str, ...]:
        """One entry per evaluation slot ("cpu", or "cuda:0", "cuda:1", ...): the default executor's pool."""
        ...

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        """Verify (and on a GPU, time) one candidate on `device`: a toolchain is also an `Evaluator`."""
        ...

    def describe(self) -> str:
        """One plain sentence on how candidates are judged here (said at the start of every run)."""
        ...

    def confirm(self, job: EvalJob, device: str, evaluation: Evaluation) -> Evaluation:
        """A passed candidate about to become the best, verified again before it is promoted: the gates under
        several seeds in every dtype its schedule declares. Returns `evaluation` (annotated) when it holds,
        else a FAILED evaluation carrying the failing seed's verdict."""
        ...
