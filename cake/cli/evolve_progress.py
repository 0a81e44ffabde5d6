"""What `cake evolve` shows while it runs: a progress bar over evaluations and one line per turn
(proposals, rejections by diagnostic ID, verdict mix, best speedup and its kind)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cake.runs.store import CandidateRow


class RichProgress:
    def __init__(self, console: Console, settings: Any, fitness_kind: str):
        self.console = console
        self.fitness_kind = fitness_kind
        # At most this many evaluations: the budget, else the seed turn plus m per turn (a guide for the bar).
        total = settings.budget_evals or 1 + (settings.turns - 1) * settings.evals_per_turn
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=console, transient=True,
                             disable=not console.is_terminal)
        self._task = self._bar.add_task("evaluations", total=total)
        self._turn = 0

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def turn_started(self, turn: int, resumed: bool) -> None:
        self._turn = turn
        what = "seed schedules" if turn == 0 else "proposals"
        self._bar.update(self._task, description=f"turn {turn}{' (resumed)' if resumed else ''}: {what}")

    def proposed(self, turn: int, proposed: int, rejected: int, queued: int) -> None:
        self._bar.update(self._task, description=f"turn {turn}: evaluating {queued} of {proposed}")

    def evaluated(self, row: CandidateRow) -> None:
        self._bar.advance(self._task)
        ev = row.evaluation
        fitness = f" speedup {ev.fitness:.3f}x ({self.fitness_kind})" if ev and ev.fitness is not None else ""
        error = f" — {ev.error.splitlines()[0][:100]}" if ev and ev.error else ""
        failed = ""
        if ev and ev.verdict and not ev.verdict.get("passed", True):
            gates = [g["gate_id"] for g in ev.verdict.get("gates", ()) if g.get("status") not in ("PASS", "SKIP")]
            failed = f" failed {', '.join(gates)}"
        seconds = f" [{ev.seconds:.0f}s]" if ev else ""
        self.console.print(f"  #{row.id} {row.status.value}{failed}{fitness}{error}{seconds}  {row.mutation[:90]}")

    def turn_finished(self, summary: Any) -> None:
        rejections = ", ".join(f"{code}×{count}" for code, count in sorted(summary.rejections.items()))
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.verdicts.items())) or "none"
        best = (f"{summary.best_fitness:.3f}x ({self.fitness_kind}, #{summary.best_id})"
                if summary.best_fitness is not None else "—")
        self.console.print(
            f"[bold]turn {summary.turn}[/bold]: proposed {summary.proposed}, rejected {summary.rejected}"
            f"{f' ({rejections})' if rejections else ''}; evaluated {summary.evaluated} ({verdicts}); "
            f"best {best}; evaluations {summary.evaluations_total}, tokens {summary.tokens_total}")
