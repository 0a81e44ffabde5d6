"""The verifier's contract gates on lowered schedules: in-process (`run_battery`, under the interpreter) for
every shipped schedule the Triton backend accepts, and end to end through `cake verify --schedule`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cake.verifier.battery import run_battery
from cake.verifier.registry import get_contract
from cake.verifier.results import GateStatus
from lowering_cases import REPO, lower_schedule, schedule_id, shipped_schedules

ACCEPTED = [p for p in shipped_schedules() if lower_schedule(p).refusal is None]


def test_the_kmeans_schedules_are_accepted() -> None:
    names = {p.name for p in ACCEPTED}
    assert {"assign_plain.cake", "update_atomic.cake"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("path", ACCEPTED, ids=schedule_id)
def test_lowered_schedule_passes_the_gates(path: Path, interpreter: None) -> None:
    lowered = lower_schedule(path)
    assert lowered.kernel is not None
    verdict = run_battery(get_contract(lowered.op), lowered.kernel, device="cpu", interpreter=True)
    failures = [f"{g.gate_id}: {g.reason}" for g in verdict.gates if g.status.is_failure]
    assert verdict.passed, failures
    ran = [g for g in verdict.gates if g.status is GateStatus.PASS]
    assert len(ran) >= 10, "most gates must actually run on the CPU"


@pytest.mark.slow
def test_cake_verify_schedule_end_to_end() -> None:
    schedule = REPO / "experiments" / "kmeans" / "assign_plain.cake"
    proc = subprocess.run(
        [sys.executable, "-m", "cake", "verify", "--schedule", str(schedule), "--device", "cpu",
         "--dtypes", "fp32", "--no-cache", "--timeout", "600"],  # generous: CI machines are shared
        capture_output=True, text=True, env=dict(os.environ), timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "kmeans_assign: PASSED" in proc.stdout
