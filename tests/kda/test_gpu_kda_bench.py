"""The CPU paths of scripts/gpu_kda_bench.py (the KDA benchmark): input sets per shape (varlen offsets from the shape's sequence lengths),
interleaved timing with a scripted clock, spot checks refusing a wrong kernel, and the JSON summary."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gpu_kda_bench as bench
import pytest
import torch
from cake.experiments.kda import shapes
from cake.experiments.kda.controls import kda_forward_chunked, kda_forward_recurrent
from cake.verifier.multiseed import SeededVerdicts
from cake.verifier.results import GateResult, GateStatus, Verdict
from cake.verifier.timing import Contestant, TimingConfig, Verification

PASSED = Verification(True, "battery", "all gates passed")
CONFIG = TimingConfig(warmup_calls=1, min_reps=2, max_reps=2, max_wall_s=1.0, cold_l2=True)


class StepClock:
    """Device time advances only inside a contestant's call, by the contestant's scripted cost."""

    def __init__(self) -> None:
        self.now = 0.0
        self.flushes = 0

    def record(self) -> object:
        return self.now

    def elapsed_ms(self, start: object, end: object) -> float:
        assert isinstance(start, float) and isinstance(end, float)
        return end - start

    def wait(self, mark: object) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        self.flushes += 1

    def wall_s(self) -> float:
        return 0.0


def costs(clock: StepClock, ms: float, kernel: Callable[..., Any]) -> Callable[..., Any]:
    def run(*inputs: Any) -> Any:
        clock.now += ms
        return kernel(*inputs)
    return run


def test_inputs_follow_the_shape_and_its_sequence_lengths() -> None:
    fixed = bench.shape_inputs(shapes.CPU_SHAPE, "cpu", 0)
    assert fixed[0].shape == (2, 37, 2, 16) and fixed[7] is None and fixed[8] is None
    varlen = bench.shape_inputs(shapes.CPU_VARLEN, "cpu", 0)
    assert varlen[8].tolist() == [0, 5, 5, 25, 37]
    assert bench.shape_inputs(shapes.CPU_VARLEN, "cpu", 0)[0].equal(varlen[0])  # seeded
    canonical = {s.name: bench.kda_shapes.SEQUENCE_LENGTHS.get(s.name) for s in shapes.GPU_SHAPES}
    assert canonical["h64_varlen_mixed"] == (1300, 547, 2048, 963, 271, 3063) and canonical["h96_fixed"] is None


def test_run_shapes_times_interleaved_and_refuses_a_wrong_kernel(tmp_path: Path) -> None:
    clock = StepClock()

    def zeros(*inputs: Any) -> Any:
        o, state = kda_forward_recurrent(*inputs)
        return torch.zeros_like(o), state

    contestants = [Contestant("fla_stand_in", costs(clock, 2.0, kda_forward_recurrent), candidate=False),
                   Contestant("seed", costs(clock, 1.0, kda_forward_chunked), verification=PASSED),
                   Contestant("wrong", costs(clock, 0.5, zeros), verification=PASSED)]
    reports = bench.run_shapes([shapes.CPU_SHAPE, shapes.CPU_VARLEN], contestants, clock, "cpu", config=CONFIG, pool=2)
    assert clock.flushes > 0
    for report in reports:
        rows = {m["name"]: m for m in report["measurements"]}
        assert rows["fla_stand_in"]["median_ms"] == pytest.approx(2.0)
        assert rows["seed"]["speedup"] == pytest.approx(2.0)
        assert rows["wrong"]["median_ms"] is None and "wrong before timing" in rows["wrong"]["failure"]
    assert bench.geomean_speedup(reports, "seed") == pytest.approx(2.0)
    assert bench.geomean_speedup(reports, "wrong") is None
    json.dumps(reports)  # the report is plain JSON


def _verdict(passed: bool) -> Verdict:
    status = GateStatus.PASS if passed else GateStatus.FAIL
    return Verdict.of("kda_forward", (GateResult("CMP-01", status, "scripted"),))


def test_an_unverified_or_missing_seed_verdict_is_not_timed(tmp_path: Path) -> None:
    assert not bench.seed_verification(tmp_path / "missing.json").passed
    one = tmp_path / "one.json"
    one.write_text(_verdict(False).to_json())
    assert bench.seed_verification(one).detail == "failed CMP-01"


def test_a_multi_seed_verdict_passes_only_when_every_seed_does(tmp_path: Path) -> None:
    path = tmp_path / "seeds.json"
    path.write_text(SeededVerdicts("kda_forward", (0, 1), (_verdict(True), _verdict(False))).to_json())
    verification = bench.seed_verification(path)
    assert not verification.passed and verification.detail == "failed under seed 1 (CMP-01); passed under 0"
    path.write_text(SeededVerdicts("kda_forward", (0, 1), (_verdict(True), _verdict(True))).to_json())
    assert bench.seed_verification(path).passed


def test_a_dry_run_lowers_the_schedule_with_its_params_and_times_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert bench.main(["--json", str(out), "--dry-run", "--params", '{"C": 16, "BK": 64}',
                       "--shapes", "h64_fixed", "h96_varlen_mixed"]) == 0
    data = json.loads(out.read_text())
    assert data["dry_run"] and data["shapes"] == [] and data["geomean_speedup"] == {}
    assert data["schedule"].endswith("kda_fused_chunkpar.cake") and data["params"] == '{"C": 16, "BK": 64}'
    assert data["notes"]["kda_fused_chunkpar"].startswith("not timed: no verdict")
    assert "kda_fused_chunkpar" not in data["contestants"]


def test_a_dry_run_with_a_passing_verdict_lists_the_schedule_as_a_contestant(tmp_path: Path) -> None:
    verdict = tmp_path / "verify.json"
    verdict.write_text(SeededVerdicts("kda_forward", (0, 1), (_verdict(True), _verdict(True))).to_json())
    out = tmp_path / "bench.json"
    assert bench.main(["--json", str(out), "--dry-run", "--seed-verdict", str(verdict)]) == 0
    data = json.loads(out.read_text())
    assert "kda_fused_chunkpar" in data["contestants"]
    assert data["seed_verification"] == "passed under seeds 0, 1 (the verdict does not name its kernel)"


def test_params_outside_the_schedule_domain_fail_before_any_timing(tmp_path: Path) -> None:
    from cake.diagnostics import DiagnosticError

    with pytest.raises(DiagnosticError, match="48 not in"):
        bench.main(["--json", str(tmp_path / "x.json"), "--dry-run", "--params", '{"C": 48}'])


def test_the_spot_check_judges_one_sequence_and_catches_its_wrong_final_state() -> None:
    inputs = bench.shape_inputs(shapes.CPU_VARLEN, "cpu", 0)
    o, state = kda_forward_recurrent(*inputs)
    check = bench.sequence_spot_check(bench.get_contract("kda_forward"), torch.float32, heads=1, seed=0)
    assert check(inputs, (o, state)) is None
    why = check(inputs, (o, state + 1e-2))
    assert why is not None and "final_state" in why and "sequence" in why and "heads" in why
    assert check(inputs, (o + 1e-2, state)) is not None


def test_a_shape_past_its_guard_is_cut_and_the_next_shape_still_runs(tmp_path: Path) -> None:
    clock = StepClock()

    def slow_on_fixed(*inputs: Any) -> Any:
        if inputs[8] is None:  # CPU_SHAPE (fixed); CPU_VARLEN passes cu_seqlens
            time.sleep(2.0)
        return kda_forward_chunked(*inputs)

    contestants = [Contestant("fla_stand_in", costs(clock, 2.0, kda_forward_recurrent), candidate=False),
                   Contestant("seed", costs(clock, 1.0, slow_on_fixed), verification=PASSED)]
    written: list[int] = []
    reports = bench.run_shapes([shapes.CPU_SHAPE, shapes.CPU_VARLEN], contestants, clock, "cpu", config=CONFIG,
                               max_seconds=5.0, on_shape=lambda so_far: written.append(len(so_far)))
    assert "cut at its 5 s guard" in reports[0]["cut"] and reports[0]["measurements"] == []
    assert {m["name"] for m in reports[1]["measurements"]} == {"fla_stand_in", "seed"}
    assert written == [1, 2]  # the caller saw every shape as it finished
    assert bench.geomean_speedup(reports, "seed") is None  # a cut shape leaves no geomean


def test_flashkda_beside_fla_gets_a_baseline_geomean_and_the_seed_is_judged_against_the_faster() -> None:
    clock = StepClock()
    contestants = [Contestant("fla_stand_in", costs(clock, 2.0, kda_forward_recurrent), candidate=False),
                   Contestant("flashkda_stand_in", costs(clock, 1.0, kda_forward_recurrent), candidate=False),
                   Contestant("seed", costs(clock, 4.0, kda_forward_chunked), verification=PASSED)]
    reports = bench.run_shapes([shapes.CPU_SHAPE, shapes.CPU_VARLEN], contestants, clock, "cpu", config=CONFIG)
    assert bench.baseline_geomean(reports, "fla_stand_in", "flashkda_stand_in") == pytest.approx(2.0)
    assert bench.geomean_speedup(reports, "seed") == pytest.approx(0.25)  # over the fastest baseline, 1.0 ms
    assert bench.baseline_geomean(reports, "fla_stand_in", "absent") is None


def test_a_dry_run_names_each_asked_baseline_that_cannot_load_here(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert bench.main(["--json", str(out), "--dry-run", "--baselines", "fla_chunk_kda", "flash_kda",
                       "--shapes", "h64_fixed"]) == 0
    data = json.loads(out.read_text())
    if not torch.cuda.is_available():
        assert data["notes"]["flash_kda"].startswith("not timed: ")
        assert "flash_kda" not in data["contestants"]
    assert data["baseline_geomean"] == {"over": "fla_chunk_kda", "flash_kda": None}
    with pytest.raises(SystemExit):
        bench.main(["--json", str(out), "--dry-run", "--baselines", "no_such_kernel"])


def test_a_verdict_that_names_its_kernel_counts_only_for_that_schedule_and_params(tmp_path: Path) -> None:
    schedule = tmp_path / "a.cake"
    schedule.write_text("schedule a")
    other = tmp_path / "b.cake"
    other.write_text("schedule b")
    path = tmp_path / "verdict.json"
    seeded = json.loads(SeededVerdicts("kda_forward", (0, 1), (_verdict(True), _verdict(True))).to_json())
    kernel = {"schedule": str(schedule), "sha256": hashlib.sha256(b"schedule a").hexdigest(),
              "options": {"backend": "triton", "params": '{"BK": 64}'}}
    path.write_text(json.dumps({**seeded, "kernel": kernel}))
    assert bench.seed_verification(path, schedule, '{"BK": 64}').passed
    refused = bench.seed_verification(path, other, '{"BK": 64}')
    assert not refused.passed and "another schedule" in refused.detail
    at_defaults = bench.seed_verification(path, schedule, None)
    assert not at_defaults.passed and "params {'BK': 64}" in at_defaults.detail
    path.write_text(json.dumps(seeded))  # written before verdicts named their kernel: taken, and said so
    unpinned = bench.seed_verification(path, schedule, None)
    assert unpinned.passed and unpinned.detail.endswith("(the verdict does not name its kernel)")
