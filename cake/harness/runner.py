"""Run an experiment's grid: every run an evolve run in `<out>/runs/<name>`, one after another, each through
the executor the caller makes for it (a local pool, or Ray with every GPU of a cluster).

Resumable the way a run is: a run whose loop stopped is skipped, a run that was killed is resumed from its
store (losing and repeating nothing), a run never started is created. The spec is copied to `<out>/spec.toml`;
continuing an experiment with a different spec is refused, so one directory holds one grid.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cake.agents.loop import LoopSettings, Progress
from cake.agents.session import EvolveSession, open_session
from cake.evaluation.protocol import Executor
from cake.harness.spec import ExperimentSpec, RunSpec
from cake.runs.store import DB_NAME, RunStore

SPEC_NAME = "spec.toml"
RUNS = "runs"


class ExperimentMismatchError(ValueError):
    """The directory holds another experiment (its spec.toml differs)."""


class RunState(enum.Enum):
    NEW = "new"
    RESUMED = "resumed"
    DONE = "done"  # stopped earlier (budget, turns, plateau ...): skipped


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run: RunSpec
    root: Path
    state: RunState
    stop: str  # the loop's stop reason, as the run recorded it
    best: float | None
    evaluations: int


class ExperimentProgress(Protocol):
    def run_started(self, run: RunSpec, index: int, total: int, state: RunState, executor: Executor,
                    settings: LoopSettings) -> Progress:
        """A run begins (index counts from 1); returns the loop's progress for it."""
        ...

    def run_finished(self, outcome: RunOutcome) -> None: ...


def run_root(out: Path, run: RunSpec) -> Path:
    return out / RUNS / run.name


def stopped(store: RunStore) -> str | None:
    """The stop reason of a run whose loop finished (its last event is the stop), else None."""
    events = store.events()
    return events[-1][2] if events and events[-1][1] == "stop" else None


def prepare(spec: ExperimentSpec, out: Path) -> None:
    """Create the experiment directory, or check that it holds this spec."""
    out.mkdir(parents=True, exist_ok=True)
    saved = out / SPEC_NAME
    if saved.is_file():
        if saved.read_text() != spec.text:
            raise ExperimentMismatchError(f"{out} holds another experiment ({saved} differs from this spec); "
                                          f"use another --out")
    else:
        saved.write_text(spec.text)
    (out / RUNS).mkdir(exist_ok=True)


def run_experiment(spec: ExperimentSpec, out: Path, *, config_for: Callable[[RunSpec], dict[str, Any]],
                   executor_for: Callable[[EvolveSession], Executor],
                   progress: ExperimentProgress | None = None) -> list[RunOutcome]:
    """Run (or continue) every run of the grid; `config_for` builds a new run's config (the CLI parses its
    `cake evolve` arguments), `executor_for` the executor of each run's session (closed after the run)."""
    prepare(spec, out)
    runs = spec.runs()
    configs = {run.name: config_for(run) for run in runs}  # every run's flags are checked before any runs
    outcomes = []
    for index, run in enumerate(runs, 1):
        root = run_root(out, run)
        if (root / DB_NAME).is_file():
            store = RunStore.open(root)
            state = RunState.DONE if stopped(store) is not None else RunState.RESUMED
        else:
            store, state = RunStore.create(root, configs[run.name]), RunState.NEW
        with store:
            if state is not RunState.DONE:
                _run_one(store, run, index, len(runs), state, executor_for, progress)
            best = _best(store)
            outcome = RunOutcome(run, root, state, stopped(store) or "?", best, store.evaluation_count())
        if progress is not None:
            progress.run_finished(outcome)
        outcomes.append(outcome)
    return outcomes


def _run_one(store: RunStore, run: RunSpec, index: int, total: int, state: RunState,
             executor_for: Callable[[EvolveSession], Executor], progress: ExperimentProgress | None) -> None:
    session = open_session(store)
    store.log("resume" if state is RunState.RESUMED else "start", f"experiment run {run.name}")
    executor = executor_for(session)
    try:
        loop_progress = None if progress is None else \
            progress.run_started(run, index, total, state, executor, session.settings)
        session.loop(executor, loop_progress).run()
    finally:
        executor.close()


def _best(store: RunStore) -> float | None:
    fits = [c.fitness for c in store.candidates() if c.fitness is not None]
    return max(fits) if fits else None
