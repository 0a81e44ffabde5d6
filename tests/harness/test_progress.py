"""The live view of `cake experiment`: what it shows in a terminal, and one line per run when not a TTY."""

from __future__ import annotations

import io
from pathlib import Path

from cake.agents.loop import LoopSettings
from rich.console import Console

from cake.cli.experiment_progress import ExperimentView
from cake.evaluation.executors import InProcessExecutor
from cake.harness.runner import RunOutcome, RunState
from cake.harness.spec import parse_spec
from cake.runs.store import CandidateRow, CandidateStatus, Evaluation, FitnessKind

SETTINGS = LoopSettings(turns=3, proposals_per_turn=4, evals_per_turn=2, seed=0, budget_evals=4)


def _row(fitness: float, worker: str) -> CandidateRow:
    ev = Evaluation(CandidateStatus.PASSED, None, (), {}, None, None, fitness, FitnessKind.MODEL, None, worker, 0.1)
    return CandidateRow(1, 1, "h", "", "k", (), "offline", "tile", CandidateStatus.PASSED, (), {}, 1.0, 0, 0, ev)


def _drive(console: Console) -> ExperimentView:
    spec = parse_spec('name = "x"\nseeds = [0, 1]\n[grid]\ncost_model = [true, false]')
    runs = spec.runs()
    view = ExperimentView(console, spec.name, len(runs), "ray")
    executor = InProcessExecutor(evaluator=None)  # type: ignore[arg-type]  # only its slots are shown
    with view:
        progress = view.run_started(runs[0], 1, len(runs), RunState.NEW, executor, SETTINGS)
        progress.turn_started(1, False)
        progress.evaluated(_row(1.25, "node-a:41/cpu"))
        progress.evaluated(_row(1.5, "node-b:7/cpu"))
        console.print(view.render())
        view.run_finished(RunOutcome(runs[0], Path("r"), RunState.NEW, "all turns done", 1.5, 2))
    return view


def test_the_live_view_shows_the_run_its_workers_and_the_best_per_arm() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)
    view = _drive(console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert view.live
    for expected in ("runs 0/4", "running cost_model-on__s0", "evaluations 2/4", "in flight 0/1 slots",
                     "node-a:41/cpu", "node-b:7/cpu", "cost_model=on", "1.500x"):
        assert expected in text, expected


def test_not_a_tty_it_prints_one_line_per_run_start_and_end() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=120)
    view = ExperimentView(console, "x", 4, "local")
    assert not view.live
    _drive(console)
    lines = [ln for ln in console.file.getvalue().splitlines() if ln.startswith(("[1/4]", "  cost_model"))]  # type: ignore[attr-defined]
    assert lines == ["[1/4] cost_model-on__s0: new",
                     "  cost_model-on__s0: new, 2 evaluations, best 1.500x; stop: all turns done"]
