"""The CPU paths of the issue-18 GPU scripts (gpu_update_bench, gpu_lloyd_bench, gpu_lloyd_check): a dry run
end to end (gates on the CPU, a worker process, the timing protocol on a scripted clock, aggregation, files),
and the stop when the default update schedule is absent. Nothing here is a measurement."""

from __future__ import annotations

import json
from pathlib import Path

import gpu_lloyd_bench
import gpu_lloyd_check
import gpu_update_bench
import pytest
import torch

from cake.arch import DEVICES

ROOT = Path(__file__).resolve().parents[2]
KMEANS = ROOT / "experiments" / "kmeans"
CONTROLS = [f"--step=kmeans_assign={KMEANS / 'controls.py'}:kmeans_assign",
            f"--step=kmeans_update={KMEANS / 'controls.py'}:kmeans_update"]
QUICK = ["--processes", "1", "--warmup-timeout", "0", "--reps", "3", "--max-seconds", "0.5", "--resamples", "200"]

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU rehearsal paths")


@pytest.fixture(autouse=True)
def private_verdict_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAKE_VERDICT_CACHE", str(tmp_path / "verdicts"))  # inherited by the worker processes


def test_update_bench_stops_when_the_update_is_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_update_bench.DEFAULT_UPDATE.is_file()  # the default ships
    out = tmp_path / "out"
    missing = tmp_path / "update_sorted.cake"
    assert gpu_update_bench.main(["--out", str(out), "--dry-run", "--update", str(missing)]) == 2
    assert "update_sorted.cake does not exist" in capsys.readouterr().err
    assert not out.exists()  # nothing verified, timed or written


def test_lloyd_scripts_stop_when_the_update_is_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    step = f"--step=kmeans_update={tmp_path / 'update_sorted.cake'}@triton"
    assert gpu_lloyd_bench.main(["--out", str(tmp_path), "--dry-run", step]) == 2
    assert gpu_lloyd_check.main(["--out", str(tmp_path), "--dry-run", step]) == 2
    assert capsys.readouterr().err.count("update_sorted.cake does not exist") == 2


def test_update_floor_counts_x_once_ids_and_both_centroid_tensors() -> None:
    from cake.experiments.workload import Shape

    shape = Shape.of("s", "bf16", "", B=2, N=100, K=10, D=8)
    (row,) = gpu_update_bench.floor_rows([shape], DEVICES["H200"]).values()
    nbytes = 2 * (100 * 8 * 2 + 10 * 8 * 2 + 10 * 8 * 2) + 2 * 100 * 8
    assert row["bytes"] == nbytes and row["floor_ms"] == pytest.approx(nbytes / 4.25e12 * 1e3)


@pytest.mark.slow
def test_update_bench_dry_run_end_to_end(tmp_path: Path) -> None:
    update = KMEANS / "update_onehot.cake"
    # One process: the headline speedup is undefined (it needs 3; flash-kmeans is missing here) -> exit 1.
    assert gpu_update_bench.main(["--out", str(tmp_path), "--dry-run", "--update", str(update), *QUICK]) == 1
    data = json.loads((tmp_path / "gpu_update_bench.json").read_text())
    # Gates by configuration, then dtype (a bucket table has one configuration per bucket).
    assert data["dry_run"] is True and data["gates"]["update_onehot.cake"]["float32"]["passed"] is True
    assert data["runs"] == {"cpu_tiny": "update_onehot.cake"}
    row = data["headlines"]["kmeans_update"]["cpu_tiny"]
    assert row["time_ms"]["ours"] is not None and row["time_ms"]["torch_index_add"] is not None
    assert row["speedup"]["ours"]["value"] is None and "process" in row["speedup"]["ours"]["undefined"]
    assert data["floors"]["cpu_tiny"]["floor_ms"] > 0
    assert "DRY RUN" in (tmp_path / "gpu_update_bench.md").read_text()
    payload = json.loads((tmp_path / "process_0.json").read_text())
    assert payload["dry_run"] is True and "flash_kmeans" in payload["ops"]["kmeans_update"]["cpu_tiny"]["problems"]


@pytest.mark.slow
def test_lloyd_bench_dry_run_end_to_end(tmp_path: Path) -> None:
    assert gpu_lloyd_bench.main(["--out", str(tmp_path), "--dry-run", *CONTROLS, *QUICK]) == 1
    data = json.loads((tmp_path / "gpu_lloyd_bench.json").read_text())
    assert data["dry_run"] is True and all(g["passed"] for g in data["gates"])
    assert data["unit"] == "ms per Lloyd iteration"
    row = data["headlines"]["lloyd_iteration"]["cpu_tiny"]
    assert row["time_ms"]["ours"]["point"] == pytest.approx(1.0 / 10)  # the scripted ms per call / 10 iterations
    entry = json.loads((tmp_path / "process_0.json").read_text())["ops"]["lloyd_iteration"]["cpu_tiny"]
    assert entry["notes"]["lloyd_check"]["ok"] is True and len(entry["notes"]["lloyd_check"]["records"]) == 10


def test_lloyd_check_dry_run_with_the_controls(tmp_path: Path) -> None:
    assert gpu_lloyd_check.main(["--out", str(tmp_path), "--dry-run", "--iterations", "3", *CONTROLS]) == 0
    data = json.loads((tmp_path / "gpu_lloyd_check.json").read_text())
    assert data["passed"] is True and data["dry_run"] is True
    (row,) = data["shapes"]
    assert row["runs"]["ours"]["ok"] and row["runs"]["torch"]["ok"] and "flash_kmeans" in row["unavailable"]


def test_update_bench_gates_each_table_configuration_a_shape_runs(tmp_path: Path) -> None:
    from cake.experiments.kmeans.update_choice import OP, RULE
    from cake.experiments.kmeans.workload import UPDATE, UPDATE_TABLE

    assert gpu_update_bench.parse_args(["--out", str(tmp_path)]).table == UPDATE_TABLE  # the op's default
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"op": OP, "rule": RULE, "buckets": [
        {"name": "small", "at_least": 0, "schedule": "update_ranked.cake", "params": {}},
        {"name": "large", "at_least": 512, "schedule": "update_ranked.cake", "params": {"BC": 64, "RWARPS": 4}}]}))
    args = gpu_update_bench.parse_args(["--out", str(tmp_path), "--table", str(table)])
    cell, large_n = UPDATE.shape("cake_cell"), UPDATE.shape("large_n")
    assert list(gpu_update_bench.gate_refs(args, [cell])) == ["update_ranked.cake (defaults)"]
    refs = gpu_update_bench.gate_refs(args, [cell, large_n])
    assert list(refs) == ["update_ranked.cake (defaults)", "update_ranked.cake (BC=64 RWARPS=4)"]
    assert dict(refs["update_ranked.cake (BC=64 RWARPS=4)"].options)["params"] == '{"BC": 64, "RWARPS": 4}'
    assert gpu_update_bench.shape_gate(args, large_n) == "update_ranked.cake (BC=64 RWARPS=4)"
    assert "--table" in gpu_update_bench.worker_command(args, 0, tmp_path / "p.json", None)
