"""The CPU paths of scripts/gpu_passes.py: the family's points are built by the passes and checked, and the dry
run writes the table's JSON without a GPU (nvcc compiles are the reachability test's and the script's own)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gpu_passes
import pytest
from cake.ir.check import check


def test_every_point_is_a_checked_member_of_the_family() -> None:
    base = gpu_passes.family()
    dims = gpu_passes.get_workload("flash_kmeans").fitness_shape("kmeans_assign").dim_map
    clean = 0
    for values in gpu_passes.POINTS:
        kernel = gpu_passes.point(base, values)
        assert {k: kernel.param(k).default for k in values} == values  # type: ignore[union-attr]
        clean += not [d for d in check(kernel, arch="sm_90a", backend="cuda", dims=dims) if d.is_error]
    assert clean == len(gpu_passes.POINTS), "every listed point is meant to run on the H200"


def test_the_dry_run_writes_one_row_per_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_passes.shutil, "which", lambda name: None)  # no compiles: the status says so
    monkeypatch.setattr(sys, "argv", ["gpu_passes.py", "--out", str(tmp_path), "--dry-run"])
    assert gpu_passes.main() == 0
    rows = json.loads((tmp_path / "passes.json").read_text())
    assert len(rows) == 1 + len(gpu_passes.POINTS)
    assert {r["status"] for r in rows} == {"checked (no nvcc)"}
    assert all(Path(r["file"]).is_file() for r in rows)
