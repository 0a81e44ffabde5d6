"""`cake experiment report RUN_DIR RUN_DIR RUN_DIR --out DEST`: separate evolve runs (seeds run on different days,
each its own run directory) aggregated as an experiment's arms are: median and quartiles of best-so-far
against evaluated (timed, on a GPU) candidates, and the final bests' median with a bootstrap interval."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.offline import OfflineAgent
from conftest import SEED
from fake_toolchain import FakeToolchain

from cake.cli import main
from cake.runs.store import RunStore

SEEDS = (3, 4, 5)


def _run(root: Path, seed: int) -> Path:
    settings = LoopSettings(turns=2, proposals_per_turn=4, evals_per_turn=2, seed=seed)
    config = {"op": "kmeans_assign", "agent": "offline", "loop": {"seed": seed}, "eval": {"backend": "triton"}}
    store = RunStore.create(root, config)
    EvolutionLoop(store, OfflineAgent(), FakeToolchain(SEED), settings, [SEED]).run()
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    # as if run on three days: unrelated folders, no experiment spec around them
    return [_run(tmp_path_factory.mktemp(f"day{i}") / f"run-s{seed}", seed) for i, seed in enumerate(SEEDS)]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_separate_run_directories_aggregate_into_one_arm_across_seeds(runs: list[Path], tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "report"
    assert main(["experiment", "report", *map(str, runs), "--out", str(dest)]) == 0
    written = {Path(line).name for line in capsys.readouterr().out.split()}
    assert written == {"curves.csv", "runs.csv", "arms.csv", "best_so_far.png", "report.md"}
    arms = _rows(dest / "arms.csv")
    assert len(arms) == 1 and arms[0]["arm"] == "kmeans_assign/triton/offline" and arms[0]["runs"] == "3"
    assert sorted(int(r["seed"]) for r in _rows(dest / "runs.csv")) == list(SEEDS)
    curves = _rows(dest / "curves.csv")
    assert {r["run"] for r in curves} == {p.name for p in runs}
    report = (dest / "report.md").read_text()
    assert "3 run directories" in report and "median" in report and "bootstrap" in report


def test_a_folder_that_is_not_a_run_or_a_missing_out_is_a_usage_error(runs: list[Path], tmp_path: Path) -> None:
    assert main(["experiment", "report", str(runs[0]), str(tmp_path), "--out", str(tmp_path / "r")]) != 0
    assert main(["experiment", "report", *map(str, runs)]) != 0
