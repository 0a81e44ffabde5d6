"""The evaluation seam: jobs, the `Evaluator` that judges one, and the `Executor` that runs many.

An executor owns *where* evaluations run (this process, a local pool with one slot per GPU or N CPU
workers, a Ray cluster); an evaluator owns *what* one evaluation is (verify in an isolated worker, then
time). Both sides exchange only the typed, picklable values defined here and `cake.runs.store.Evaluation`,
so an executor can ship a job and its evaluator to another process or host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from cake.runs.store import Evaluation, Retime

if TYPE_CHECKING:
    from cake.evaluation.ahead import AheadOutcome, AheadProcesses


@dataclass(frozen=True, slots=True)
class EvalJob:
    candidate_id: int
    ir_hash: str
    path: Path  # the candidate's .cake artifact in the run directory
    predicted_ms: float | None


@dataclass(frozen=True, slots=True)
class Completed:
    job: EvalJob
    evaluation: Evaluation
    device: str  # where it ran: a new best is re-timed there, in a fresh process (`Evaluator.retime`)
    # Attempts lost to the machinery before this one (a worker or node died), one reason each; the loop
    # records them as store events.
    retries: tuple[str, ...] = ()
    ahead: AheadOutcome | None = None  # what was compiled ahead of this evaluation (None: nothing was tried)


class Evaluator(Protocol):
    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        """Verify (and on a GPU, time) one candidate on `device` ("cpu", "cuda:0", ...), isolated from this
        process. Expected failures of the candidate are an Evaluation (FAILED/ERROR); a bug of the
        evaluation machinery raises."""
        ...


@runtime_checkable
class AheadCompiler(Protocol):
    def compile_ahead(self, job: EvalJob, jobs: int, processes: AheadProcesses | None = None) -> AheadOutcome | None:
        """Build on the CPU, isolated, what evaluating `job` will compile (`jobs` compiles at a time), into the
        cache its evaluation reads; None when the evaluation compiles nothing ahead of its calls. Never changes
        the evaluation's result: a problem here is reported in the outcome and met again by the evaluation."""
        ...


@runtime_checkable
class ProcessHolder(Protocol):
    def close(self) -> None:
        """End the processes this evaluator keeps between evaluations in this process (bench servers); a later
        evaluation starts new ones. The executor that runs it calls this when it closes."""
        ...


@runtime_checkable
class Retimer(Protocol):
    def retime(self, job: EvalJob, device: str) -> Retime:
        """Time a candidate that became the best again, in a fresh isolated process on `device` (measured
        fitness only): what a run reports as its best is this figure, independent of the timing that selected
        it. An undefined speedup is a `Retime` with `fitness` None and the reason in `error`."""
        ...


class Executor(Protocol):
    def capacity(self) -> Mapping[str, int]:
        """How many evaluations may run at once, per device ("cpu": 2, "cuda:0": 1, ...)."""
        ...

    def prepare(self, jobs: Sequence[EvalJob]) -> None:
        """`jobs` are about to be submitted (a turn's queue): an executor may start the CPU work they need
        (compiles) now, while earlier jobs hold the devices. A hint only: what `collect` returns for a job is the
        same with or without it."""
        ...

    def submit(self, job: EvalJob) -> None:
        """Queue `job`; it starts when a slot is free."""
        ...

    def collect(self) -> list[Completed]:
        """Block until at least one submitted job finished (none pending: return []), and return every job
        finished since the last call. An evaluator's exception propagates here."""
        ...

    def pending(self) -> int:
        """Jobs submitted and not yet returned by `collect`."""
        ...

    def close(self) -> None:
        """Release workers; jobs not yet started are dropped (a resumed run evaluates them again)."""
        ...
