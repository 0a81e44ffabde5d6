"""What `cake experiment` shows while it runs: one live view (rich) of the runs (done, running, to do), the
running one's evaluations, the evaluations in flight on the executor's slots, finished evaluations per worker
(host:pid of a Ray worker, or the local device), and the best so far per arm. Not a TTY: one line per run."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from cake.agents.loop import LoopSettings, Progress, TurnSummary
from cake.evaluation.protocol import Executor
from cake.harness.runner import RunOutcome, RunState
from cake.harness.spec import RunSpec
from cake.runs.store import CandidateRow

WORKERS_SHOWN = 8


class ExperimentView:
    def __init__(self, console: Console, name: str, total: int, executor_kind: str):
        self.console = console
        self.name = name
        self.total = total
        self.executor_kind = executor_kind
        self.live = console.is_terminal
        self.finished = 0
        self.skipped = 0
        self.current: RunSpec | None = None
        self.current_state: RunState | None = None
        self.executor: Executor | None = None
        self.evaluations = 0
        self.budget: int | None = None
        self.turn = 0
        self.best: dict[str, float] = {}
        self.by_worker: Counter[str] = Counter()
        self._live = Live(console=console, refresh_per_second=2, transient=False, get_renderable=self.render) \
            if self.live else None

    def __enter__(self) -> ExperimentView:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    # ------------------------------------------------------------------------------------ experiment events

    def run_started(self, run: RunSpec, index: int, total: int, state: RunState, executor: Executor,
                    settings: LoopSettings) -> Progress:
        self.current, self.current_state, self.executor = run, state, executor
        self.evaluations, self.turn = 0, 0
        self.budget = settings.budget_evals or 1 + (settings.turns - 1) * settings.evals_per_turn
        if not self.live:
            self.console.print(f"[{index}/{total}] {run.name}: {state.value}")
        return _RunProgress(self)

    def run_finished(self, outcome: RunOutcome) -> None:
        if outcome.state is RunState.DONE:
            self.skipped += 1
        self.finished += 1
        if outcome.best is not None:
            arm = outcome.run.arm
            self.best[arm] = max(self.best.get(arm, outcome.best), outcome.best)
        self.current = None
        if not self.live:
            best = f"{outcome.best:.3f}x" if outcome.best is not None else "—"
            self.console.print(f"  {outcome.run.name}: {outcome.state.value}, {outcome.evaluations} evaluations, "
                               f"best {best}; stop: {outcome.stop}")

    # ------------------------------------------------------------------------------------ rendering

    def render(self) -> Any:
        head = Table.grid(padding=(0, 2))
        head.add_row(f"[bold]cake experiment[/bold] {self.name}",
                     f"runs {self.finished}/{self.total} ({self.skipped} already done)",
                     f"executor {self.executor_kind}")
        if self.current is not None:
            slots = sum(self.executor.capacity().values()) if self.executor else 0
            in_flight = self.executor.pending() if self.executor else 0
            head.add_row(f"running [cyan]{self.current.name}[/cyan] ({self.current_state.value if self.current_state else ''})",
                         f"turn {self.turn}, evaluations {self.evaluations}/{self.budget}",
                         f"in flight {min(in_flight, slots)}/{slots} slots, queued {max(0, in_flight - slots)}")
        workers = Table(title="evaluations per worker", title_justify="left", show_edge=False)
        workers.add_column("worker")
        workers.add_column("finished", justify="right")
        # A Ray executor knows the host:pid of each worker; a local pool, the device slot.
        by_worker = getattr(self.executor, "finished_by_worker", None) or self.by_worker
        for worker, count in Counter(by_worker).most_common(WORKERS_SHOWN):
            workers.add_row(worker, str(count))
        best = Table(title="best so far per arm", title_justify="left", show_edge=False)
        best.add_column("arm")
        best.add_column("best", justify="right")
        for arm, value in sorted(self.best.items()):
            best.add_row(arm, f"{value:.3f}x")
        return Group(head, workers, best)


class _RunProgress:
    """The loop's progress for the running run, feeding the view."""

    def __init__(self, view: ExperimentView):
        self.view = view

    def turn_started(self, turn: int, resumed: bool) -> None:
        self.view.turn = turn

    def proposed(self, turn: int, proposed: int, rejected: int, queued: int) -> None:
        pass

    def evaluated(self, row: CandidateRow) -> None:
        view = self.view
        view.evaluations += 1
        if row.evaluation is not None:
            view.by_worker[row.evaluation.worker] += 1
        if row.fitness is not None and view.current is not None:
            arm = view.current.arm
            view.best[arm] = max(view.best.get(arm, row.fitness), row.fitness)

    def turn_finished(self, summary: TurnSummary) -> None:
        pass
