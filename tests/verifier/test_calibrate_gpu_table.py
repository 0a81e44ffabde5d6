"""`python -m cake.verifier.calibrate --device cuda` and the GPU table twin: where it is written, how the verifier
merges it with the CPU table (the larger coefficient wins on every device), and that the CPU refuses cleanly."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from cake.verifier import calibrate
from cake.verifier.registry import get_contract
from cake.verifier.tolerance import gpu_table_path, load_table


def _table(path: Path, coefficients: dict[str, float], default: float = 2.0) -> None:
    ops = {"row_sum": {d: {"coefficient": c} for d, c in coefficients.items()}}
    path.write_text(json.dumps({"default_coefficient": default, "ops": ops}))


def test_the_gpu_twin_sits_beside_the_table() -> None:
    assert gpu_table_path(Path("experiments/kmeans/tolerances.json")) == Path("experiments/kmeans/tolerances_cuda.json")


def test_the_larger_coefficient_of_both_tables_wins(tmp_path: Path) -> None:
    cpu = tmp_path / "tolerances.json"
    _table(cpu, {"float32": 2.0, "float16": 3.0})
    assert load_table(cpu).coefficient("row_sum", torch.float32) == 2.0
    _table(gpu_table_path(cpu), {"float32": 2.5, "float16": 2.0, "bfloat16": 4.0})
    load_table.cache_clear()
    merged = load_table(cpu)
    assert merged.coefficient("row_sum", torch.float32) == 2.5  # the GPU control needed more
    assert merged.coefficient("row_sum", torch.float16) == 3.0  # the CPU control needed more
    assert merged.coefficient("row_sum", torch.bfloat16) == 4.0
    load_table.cache_clear()


def test_device_cuda_without_a_gpu_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the H200 script runs this for real")
    with pytest.raises(SystemExit) as exit_info:
        calibrate.main(["--device", "cuda"])
    assert exit_info.value.code == 2 and "no CUDA device" in capsys.readouterr().err


def test_a_gpu_calibration_writes_the_twin_not_the_cpu_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = tmp_path / "tolerances.json"
    _table(cpu, {"float32": 2.0})
    contract = get_contract("row_sum")
    moved = replace(contract, tolerance=replace(contract.tolerance, table=cpu))
    monkeypatch.setattr(calibrate, "get_contract", lambda name: moved)
    monkeypatch.setattr(calibrate, "_where", lambda device: f"test {device}")
    entry = {"float32": {"coefficient": 2.25}}
    written = calibrate.write_tables({"row_sum": entry}, None, "cuda")
    assert written == [gpu_table_path(cpu)]
    data = json.loads(gpu_table_path(cpu).read_text())
    assert data["ops"]["row_sum"] == entry and "test cuda" in data["method"]
    assert json.loads(cpu.read_text())["ops"]["row_sum"]["float32"]["coefficient"] == 2.0  # untouched
    load_table.cache_clear()
