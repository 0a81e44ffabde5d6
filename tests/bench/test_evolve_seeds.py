"""scripts/evolve_seeds.py: the best-so-far curve of several clean-start evolve seeds (median, min, max per
number of timed candidates; a seed that stopped earlier keeps its last best), and a clear refusal of a file that
is not a finished run. Synthetic series: nothing here is a measurement."""

from __future__ import annotations

import json
from pathlib import Path

import evolve_seeds


def _run(tmp_path: Path, seed: int, fitness: list[float]) -> Path:
    best = 0.0
    series = []
    for i, f in enumerate(fitness):
        best = max(best, f)
        series.append({"evaluations": i + 1, "candidate": 10 * i, "fitness": f, "best_fitness": best, "tokens": 0})
    path = tmp_path / f"seed{seed}.json"
    path.write_text(json.dumps({"command": ["cake", "evolve", "--seed", str(seed)], "best_series": series,
                                "summary": {"best": {"id": 7, "fitness": best},
                                            "evaluations_to_parity_by_baseline": {"triton_assign": None}}}))
    return path


def test_the_curve_is_the_median_and_spread_of_best_so_far(tmp_path: Path) -> None:
    seeds = [evolve_seeds.Seed.read(_run(tmp_path, s, f)) for s, f in
             ((1, [0.2, 0.5, 0.4]), (2, [0.3, 0.3, 0.9, 0.8]), (3, [0.1]))]
    rows = evolve_seeds.curve_table(seeds)
    assert [r["evaluations"] for r in rows] == [1, 2, 3, 4]
    assert rows[0] == {"evaluations": 1, "median": 0.2, "min": 0.1, "max": 0.3}
    assert rows[1] == {"evaluations": 2, "median": 0.3, "min": 0.1, "max": 0.5}
    assert rows[3] == {"evaluations": 4, "median": 0.5, "min": 0.1, "max": 0.9}  # seeds 1 and 3 keep their last best


def test_main_prints_the_table_and_says_how_many_seeds_are_missing(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "seeds.json"
    assert evolve_seeds.main([str(_run(tmp_path, 1, [0.2, 0.6])), str(_run(tmp_path, 2, [0.4])), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "issue 17 asks for 3, 1 missing" in text and "seed 1: best #7 0.600x" in text
    assert json.loads(out.read_text())["curve"][1]["median"] == 0.5


def test_a_file_that_is_not_a_finished_run_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"summary": {}}))
    assert evolve_seeds.main([str(bad)]) == 2
    assert "no `best_series`" in capsys.readouterr().err


def test_a_missing_retime_interval_is_read_again_from_the_runs_samples(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Before session 25 a baseline the timing protocol retired left a re-timing's interval empty in the summary;
    the samples beside it still hold every rep, so the interval is read from them and marked as such."""
    path = _run(tmp_path, 13, [0.9])
    data = json.loads(path.read_text())
    data["summary"]["best"]["retimed"] = {"fitness": 1.40 / 1.30, "interval": None, "samples": "a.retime.json"}
    path.write_text(json.dumps(data))
    candidates = tmp_path / "run" / "candidates"
    candidates.mkdir(parents=True)
    (candidates / "a.retime.json").write_text(json.dumps({"shapes": [{"shape": {"name": "cake_cell"}, "measurements": [
        {"name": "candidate", "candidate": True, "times_ms": [1.30, 1.31, 1.29, 1.30],
         "extra": {"speedup": {"against": ["triton_assign", "torch_mm"]}}},
        {"name": "triton_assign", "candidate": False, "times_ms": [1.40, 1.41, 1.39, 1.40]},
        {"name": "torch_mm", "candidate": False, "times_ms": [9.0]}]}]}))
    seed = evolve_seeds.Seed.read(path)
    retimed = seed.best["retimed"]
    assert isinstance(retimed, dict) and retimed["interval_from"] == "the run's stored samples"
    assert retimed["interval"]["retired"] == ["torch_mm@cake_cell"]
    assert evolve_seeds.main([str(path)]) == 0
    assert "(interval from the stored samples)" in capsys.readouterr().out
