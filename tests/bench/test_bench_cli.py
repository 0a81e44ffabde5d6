"""`cake bench` and `cake rank`: refusals, exit codes, and the bench glue on a CPU with a scripted clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cake.experiments.kmeans import baselines as fkb
from cake.experiments.workload import Prepared, Shape, get_workload
from cake.verifier.results import GateResult, GateStatus, Verdict
from cake.verifier.timing import TimingConfig, Unverified, Verification

from cake.arch import DEVICES
from cake.cli import main
from cake.cli.bench import print_reports
from cake.evaluation.bench import bench_shape, verdict_verification

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "experiments" / "kmeans" / "assign_plain.cake"
PINGPONG = ROOT / "experiments" / "kmeans" / "assign_pingpong.cake"
CONTROL = f"{ROOT / 'tests' / 'verifier' / 'corpus' / 'controls.py'}:row_sum_torch"
ASSIGN = get_workload("flash_kmeans").op("kmeans_assign")
TINY = Shape.of("tiny", "fp32", "", B=2, N=50, K=7, D=16)


class TickClock:
    """Every kernel call costs one scripted millisecond; nothing here is a measurement."""

    def __init__(self) -> None:
        self.now = 0.0

    def record(self) -> object:
        self.now += 0.5
        return self.now

    def elapsed_ms(self, start: object, end: object) -> float:
        return float(end) - float(start)  # type: ignore[arg-type]

    def wait(self, mark: object) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        pass

    def wall_s(self) -> float:
        return 0.0


CONFIG = TimingConfig(warmup_calls=1, min_reps=3, max_reps=3)
OK = Verification(True, "battery", "test")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_bench_without_a_gpu_exits_2_and_times_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--op", "row_sum", "--kernel", CONTROL]) == 2
    assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--shapes", "nope"], "neither a known shape"),
    (["--baseline", "nope"], "no baseline"),
    (["--param", "BN=64"], "--param and --backend"),  # a --kernel is already compiled
])
def test_bench_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = f"{ROOT / 'tests' / 'bench' / 'test_bench_cli.py'}:TickClock"
    assert main(["bench", "--op", "kmeans_assign", "--kernel", kernel, *argv]) == 2
    assert message in capsys.readouterr().err


def test_bench_pipeline_refuses_schedule_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--pipeline", "lloyd_iteration", "--param", "BN=64"]) == 2
    assert "a --pipeline's kernels are its --step sources" in capsys.readouterr().err


def test_bench_glue_times_candidate_and_baseline_with_speedup() -> None:
    report = bench_shape(ASSIGN, TINY, [("candidate", fkb.torch_assign_mm, OK)],
                         [("torch_cdist", Prepared(run=fkb.torch_assign_cdist))], TickClock(), CONFIG, DEVICES["H200"],
                         device="cpu", pool=2)
    cand = report.candidate
    assert cand is not None and cand.failure is None and cand.reps == 3
    assert cand.speedup == pytest.approx(1.0)  # both cost one scripted tick
    assert [m.name for m in report.measurements] == ["candidate", "torch_cdist"]
    assert json.loads(json.dumps(report.to_json()))["shape"]["name"] == "tiny"


def test_bench_glue_speedup_is_undefined_when_a_baseline_is_missing_or_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    def wrong(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (fkb.torch_assign_mm(x, c) + 1) % c.shape[1]

    report = bench_shape(ASSIGN, TINY, [("candidate", fkb.torch_assign_mm, OK)],
                         [("torch_mm", Prepared(run=wrong)), ("torch_cdist", Prepared(run=fkb.torch_assign_cdist))],
                         TickClock(), CONFIG, DEVICES["H200"], device="cpu", pool=2,
                         unavailable=[("flash_kmeans", "flash-kmeans is not installed")])
    cand = report.candidate
    assert cand is not None and cand.speedup is None and cand.median_ms is not None  # timed, but no speedup
    speedup = json.loads(json.dumps(report.to_json()))["measurements"][0]["extra"]["speedup"]
    assert speedup["value"] is None and speedup["against"] == ["torch_mm", "torch_cdist", "flash_kmeans"]
    assert "baseline torch_mm: wrong before timing" in speedup["undefined"]
    assert "baseline flash_kmeans: not available: flash-kmeans is not installed" in speedup["undefined"]
    print_reports([report], title="t")
    assert "speedup undefined" in capsys.readouterr().out


def test_bench_glue_refuses_an_unverified_candidate() -> None:
    failed = verdict_verification(Verdict.of("kmeans_assign", (GateResult("CMP-01", GateStatus.FAIL, "wrong"),)))
    assert not failed.passed and failed.detail == "failed: CMP-01 (FAIL); CMP-01: wrong"
    with pytest.raises(Unverified):
        bench_shape(ASSIGN, TINY, [("candidate", fkb.torch_assign_mm, failed)], [], TickClock(), CONFIG,
                    DEVICES["H200"], device="cpu", pool=2)


def test_bench_glue_reports_a_candidate_wrong_at_this_shape() -> None:
    def off_by_one(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (fkb.torch_assign_mm(x, c) + 1) % c.shape[1]

    report = bench_shape(ASSIGN, TINY, [("candidate", off_by_one, OK)], [], TickClock(), CONFIG, DEVICES["H200"],
                         device="cpu", pool=2)
    assert report.candidate is not None and report.candidate.median_ms is None
    assert (report.candidate.failure or "").startswith("wrong before timing")


def test_bench_glue_does_not_flag_a_plausible_time() -> None:
    cell = Shape.of("cell_like", "fp32", "", B=2, N=50, K=7, D=16)
    # one scripted tick (1 ms) for 2*2*50*7*16 flops is slow, never implausible
    report = bench_shape(ASSIGN, cell, [("candidate", fkb.torch_assign_mm, OK)], [], TickClock(), CONFIG,
                         DEVICES["H200"], device="cpu", pool=2)
    assert report.candidate is not None and not report.candidate.implausible


def test_rank_sorts_predictions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rank", str(PLAIN), str(PINGPONG), "--json"]) == 0
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    times = [r["time_s"] for r in ranked]
    assert times == sorted(times) and {Path(r["file"]).name for r in ranked} == {PLAIN.name, PINGPONG.name}


def test_rank_sweep_and_params(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["rank", str(PLAIN), "--sweep", "--param", "WARPS=4", "--shape", "B=32,N=65536,K=1024,D=128",
                 "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code in (0, 1)  # 1 when some assignment does not fit an SM (listed as unpriced)
    assert len(data["ranked"]) + len(data["unpriced"]) == 4 * 4 * 5
    assert all(r["params"]["WARPS"] == 4 for r in data["ranked"])


def test_rank_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.cake"
    bad.write_text("schedule x implements\n")
    assert main(["rank", str(bad)]) == 2
    assert main(["rank", str(PLAIN), "--param", "BN"]) == 2
    assert main(["rank", str(PLAIN), "--device", "Z100"]) == 2
    err = capsys.readouterr().err
    assert "does not parse" in err and "NAME=INTEGER" in err and "unknown device" in err
