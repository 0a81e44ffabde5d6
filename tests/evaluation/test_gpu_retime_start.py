"""The CPU path of scripts/gpu_retime_start.py: both ways of re-timing run, each in a process of its own, and on this
GPU-less machine each says why nothing was timed; the report keeps every row and the medians."""

from __future__ import annotations

import json
from pathlib import Path

import gpu_retime_start


def test_both_ways_run_and_say_why_nothing_was_timed_here(tmp_path: Path) -> None:
    out = tmp_path / "retime_start.json"
    assert gpu_retime_start.main(["--rounds", "1", "--out", str(out)]) == 1  # nothing timed: a failed run
    report = json.loads(out.read_text())
    assert [r["mode"] for r in report["rows"]] == ["warm-up", "one-shot", "started ahead"]
    assert all("no CUDA device here" in r["error"] for r in report["rows"])
    assert set(report["median_s"]) == {"one-shot", "started ahead"}
