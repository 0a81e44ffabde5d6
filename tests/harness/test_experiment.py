"""`cake experiment`: a spec's grid runs (on Ray, 2 CPU workers), resumes after a crash without redoing a
finished run, and its report has the curves, the table and the plot. The fast tests keep the real checker,
cost model, agent and store and stand in for the verifier worker only (ray_doubles); the slow one runs the CLI
end to end with the real evaluator."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cake.agents.session import EvolveSession
from ray_doubles import Crash, CrashesAt, ModelEvaluator

from cake.cli.common import UsageError
from cake.cli.evolve import new_config, parse_evolve_args
from cake.evaluation.executors import LocalPoolExecutor
from cake.harness.report import write_report
from cake.harness.runner import ExperimentMismatchError, RunState, run_experiment
from cake.harness.spec import RunSpec, SpecError, load_spec, parse_spec
from cake.runs.store import RunStore

REPO = Path(__file__).resolve().parents[2]
SPEC = """
name = "tiny"
seeds = [0, 1]

[evolve]
op = "flash_kmeans"
device = "cpu"
turns = 3
proposals = 6
evals_per_turn = 2
budget = 4

[grid]
static_checks = [true, false]
"""


@pytest.fixture(autouse=True)
def _no_user_rules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CAKE_RULES_DIR", str(tmp_path / "no-user-rules"))


def config_for(run: RunSpec) -> dict:
    return new_config(parse_evolve_args([*run.argv(), "--workers", "2"], where=run.name))


def model(session: EvolveSession) -> ModelEvaluator:
    return ModelEvaluator(session.toolchain.model_baseline_ms or 1.0, delay_s=0.0)


@pytest.fixture
def confirmed_by_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A would-be best is confirmed without the verifier worker too (as `ModelEvaluator` evaluates): the real
    confirmation ran every seed's gates under the interpreter in a fresh worker, minutes per experiment; the
    loop's tests check that it is asked for, the slow end-to-end test runs it."""
    from cake.agents.cake_toolchain import CakeToolchain

    monkeypatch.setattr(CakeToolchain, "confirm", lambda self, job, device, evaluation: evaluation)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_a_small_experiment_runs_on_ray_and_its_report_has_the_plots(ray_local, confirmed_by_model: None,
                                                                     tmp_path: Path) -> None:
    from cake.evaluation.ray_executor import RayExecutor

    spec, out = parse_spec(SPEC), tmp_path / "exp"
    outcomes = run_experiment(spec, out, config_for=config_for,
                              executor_for=lambda s: RayExecutor(model(s), device="cpu"))
    assert [o.run.name for o in outcomes] == ["static_checks-on__s0", "static_checks-on__s1",
                                              "static_checks-off__s0", "static_checks-off__s1"]
    assert all(o.state is RunState.NEW and o.evaluations == 4 for o in outcomes)
    off = RunStore.open_read_only(out / "runs" / "static_checks-off__s0")
    assert off.config["loop"]["static_checks"] is False and off.config["loop"]["seed"] == 0

    written = {p.name: p for p in write_report(out)}
    assert set(written) == {"curves.csv", "runs.csv", "arms.csv", "best_so_far.png", "report.md"}
    assert all(p.stat().st_size > 0 for p in written.values())
    assert written["best_so_far.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curves, runs, arms = (_rows(written[n]) for n in ("curves.csv", "runs.csv", "arms.csv"))
    assert len(curves) == 16 and {r["evaluation"] for r in curves} == {"1", "2", "3", "4"}
    assert [r["run"] for r in runs] == [o.run.name for o in outcomes]
    assert [(r["arm"], r["runs"]) for r in arms] == [("static_checks=on", "2"), ("static_checks=off", "2")]
    for arm in arms:  # the interval holds its median
        assert float(arm["best_low"]) <= float(arm["best_median"]) <= float(arm["best_high"])
    report = written["report.md"].read_text()
    assert "| static_checks=off | 2 | 2 |" in report and "cost model's predicted speedup" in report

    again = run_experiment(spec, out, config_for=config_for,
                           executor_for=lambda s: RayExecutor(model(s), device="cpu"))
    assert all(o.state is RunState.DONE for o in again)  # finished runs are skipped


def test_a_crashed_experiment_resumes_its_run_and_skips_the_finished_ones(confirmed_by_model: None,
                                                                          tmp_path: Path) -> None:
    spec, out = parse_spec(SPEC), tmp_path / "exp"
    reference = run_experiment(spec, tmp_path / "reference", config_for=config_for,
                               executor_for=lambda s: LocalPoolExecutor(model(s), ("cpu",)))
    second = spec.runs()[1].name
    with RunStore.open_read_only(tmp_path / "reference" / "runs" / second) as ref:
        victim = [c.id for c in ref.candidates() if c.evaluation][2]
    with pytest.raises(Crash):  # the second run's third evaluation crashes the machinery
        run_experiment(spec, out, config_for=config_for, executor_for=lambda s: LocalPoolExecutor(
            CrashesAt(model(s), victim) if s.store.root.name == second else model(s), ("cpu",)))
    with RunStore.open(out / "runs" / second) as crashed:
        kept = {c.id: c.evaluation for c in crashed.candidates() if c.evaluation}
    assert 0 < len(kept) < 4
    outcomes = run_experiment(spec, out, config_for=config_for,
                              executor_for=lambda s: LocalPoolExecutor(model(s), ("cpu",)))
    assert [o.state for o in outcomes] == [RunState.DONE, RunState.RESUMED, RunState.NEW, RunState.NEW]
    with RunStore.open(out / "runs" / second) as resumed:
        assert {c.id: c.evaluation for c in resumed.candidates() if c.id in kept} == kept
    assert [(o.run.name, o.evaluations, o.best) for o in outcomes] == \
        [(o.run.name, o.evaluations, o.best) for o in reference]
    with pytest.raises(ExperimentMismatchError):
        run_experiment(parse_spec(SPEC.replace("budget = 4", "budget = 5")), out, config_for=config_for,
                       executor_for=lambda s: LocalPoolExecutor(model(s), ("cpu",)))


@pytest.mark.parametrize(("text", "message"), [
    ("seeds = [0]", "`name`"),
    ('name = "x"\nseeds = [0, 0]', "repeats"),
    ('name = "x"\n[evolve]\nseed = 3', "set by the experiment"),
    ('name = "x"\n[evolve]\nbudget = 3\n[grid]\nbudget = [1, 2]', "both"),
    ('name = "x"\n[grid]\nbudget = []', "non-empty"),
    ('name = "x"\nruns = 3', "unknown keys"),
])
def test_a_bad_spec_says_which_key(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_spec(text)


def test_an_unknown_flag_is_a_usage_error_naming_the_run() -> None:
    run = parse_spec('name = "x"\n[grid]\ncost_modle = [true, false]').runs()[0]
    with pytest.raises(UsageError, match=r"run cost_modle-on__s0: unrecognized arguments: --cost-modle"):
        parse_evolve_args(run.argv(), where=f"run {run.name}")


@pytest.mark.parametrize("path", sorted((REPO / "experiments" / "specs").glob("*.toml")), ids=lambda p: p.stem)
def test_the_ablation_specs_parse_into_evolve_runs(path: Path) -> None:
    spec = load_spec(path)
    assert spec.grid and len(spec.seeds) >= 5
    for run in spec.runs():
        args = parse_evolve_args(run.argv(), where=run.name)
        assert args.seed == run.seed


@pytest.mark.slow
def test_cake_experiment_end_to_end_with_the_real_evaluator(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace("budget = 4", f'budget = 4\nverdict_cache = "{tmp_path / "verdicts"}"'))
    env_rules = str(Path(tempfile.gettempdir()) / "cake-tests-no-user-rules")
    cmd = [sys.executable, "-m", "cake", "experiment", str(spec), "--out", str(tmp_path / "out"),
           "--executor", "ray", "--workers", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "CAKE_RULES_DIR": env_rules})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 runs (0 were already done)" in done.stdout
    report = subprocess.run([sys.executable, "-m", "cake", "experiment", "report", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    runs = _rows(tmp_path / "out" / "report" / "runs.csv")
    assert len(runs) == 4 and all(r["evaluations"] == "4" and r["fitness_kind"] == "model" for r in runs)
