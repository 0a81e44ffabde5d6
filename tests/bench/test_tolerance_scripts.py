"""The CPU paths of the tolerance scripts the H200 stage runs (scripts/gpu/s4_tolerances.sh): the table check on
the session-3 GPU tables (which it must refuse) and the CPU reproduction of that calibration at small shapes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "results" / "h200-2026-12-01" / "s3-call3"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_the_check_flags_the_session3_gpu_tables(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    proc = _run("scripts/check_tolerance_tables.py", "--out", str(out),
                "--pair", "experiments/kmeans/tolerances.json", str(H200 / "kmeans_tolerances_cuda.json"),
                "--pair", "experiments/starter/tolerances.json", str(H200 / "starter_tolerances_cuda.json"))
    assert proc.returncode == 1, proc.stderr
    assert "FLAG kmeans_update float32: coefficient 50899.2 outside [2, 100]" in proc.stdout
    assert "FLAG kmeans_update bfloat16" in proc.stdout and "FLAG matmul" not in proc.stdout
    report = json.loads(out.read_text())
    assert report["flagged"] == 3 and report["band"]["coefficient"] == [2.0, 100.0]


def test_the_check_says_a_missing_gpu_table_is_missing(tmp_path: Path) -> None:
    proc = _run("scripts/check_tolerance_tables.py", "--out", str(tmp_path / "c.json"),
                "--pair", "experiments/kmeans/tolerances.json", str(tmp_path / "none_cuda.json"))
    assert proc.returncode == 1 and "MISSING" in proc.stdout


@pytest.mark.skipif(not torch.set_flush_denormal(False), reason="this CPU cannot flush subnormals")
def test_the_reproduction_shows_the_flush_on_exc02(tmp_path: Path) -> None:
    out = tmp_path / "repro.json"
    proc = _run("scripts/repro_update_calibration.py", "--out", str(out), "--dims", "small", "--dtypes", "float32",
                "--gates", "CMP-01", "EXC-02")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert {r["model"].split()[0] for r in rows} == {"before", "contract"}
    for row in rows:
        found = row["max_ratio_by_gate"]
        flushed = "flushed" in row["control"]
        assert (found["EXC-02"] > 1e3) is flushed, row  # only the flushing control leaves the model, on EXC-02 only
        assert found["CMP-01"] < 1.0, row
