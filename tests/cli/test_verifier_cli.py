"""`cake verify`, `cake replay`, `cake audit`, `cake ops`: exit codes 0 / 1 / 2 and what they print."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cake.cli import main

CORPUS = Path(__file__).resolve().parent.parent / "verifier" / "corpus"
CONTROL = f"{CORPUS / 'controls.py'}:row_sum_torch"
BUG = f"{CORPUS / 'bugs_row_sum.py'}:row_sum_drops_remainder"
FAST = ["--dtypes", "fp32", "--timeout", "60"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAKE_VERDICT_CACHE", str(tmp_path / "verdicts"))


def test_verify_control_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--op", "row_sum", "--kernel", CONTROL, *FAST]) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and "CMP-01" in out


def test_verify_bug_exits_1_and_writes_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "verdict.json"
    assert main(["verify", "--op", "row_sum", "--kernel", BUG, *FAST, "--json", str(out_json)]) == 1
    data = json.loads(out_json.read_text())
    failing = [g for g in data["gates"] if g["status"] == "FAIL"]
    assert not data["passed"] and len(failing) == 1  # stopped at the first failure
    assert failing[0]["replay_token"].startswith("cake1:row_sum:")
    assert "FAILED" in capsys.readouterr().out
    assert "row_sum_drops_remainder" in data["kernel"]["kernel"]


def test_a_schedule_verdict_names_the_file_by_its_sha256_and_its_params(tmp_path: Path) -> None:
    import argparse
    import hashlib

    from cake.verifier.worker_protocol import KernelRef

    from cake.cli.verify import kernel_identity

    schedule = tmp_path / "s.cake"
    schedule.write_text("schedule s")
    ref = KernelRef.loader("cake.lowering.runtime:load_schedule", str(schedule), {"params": '{"BK": 64}'})
    identity = kernel_identity(argparse.Namespace(schedule=str(schedule)), ref)
    assert identity == {"schedule": str(schedule), "sha256": hashlib.sha256(b"schedule s").hexdigest(),
                        "options": {"params": '{"BK": 64}'}}


@pytest.mark.parametrize("argv, message", [
    (["--op", "no_such_op", "--kernel", CONTROL], "unknown op"),
    (["--op", "row_sum", "--kernel", f"{CORPUS}/missing.py:f"], "does not exist"),
    (["--op", "row_sum", "--kernel", f"{CORPUS / 'broken_import.py'}:kernel"], "fails at import time"),
    (["--op", "row_sum", "--kernel", f"{CORPUS / 'controls.py'}:no_such_function"], "no attribute"),
    (["--kernel", CONTROL], "--op is required"),
    (["--op", "row_sum", "--kernel", CONTROL, "--dtypes", "fp8"], "unknown dtype"),
])
def test_verify_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", *argv, "--timeout", "60"]) == 2
    assert message in capsys.readouterr().err


def test_verify_schedule_without_loader_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The loader lands with the lowering; until then --schedule must say why it cannot run.
    if importlib.util.find_spec("cake.lowering.runtime") is not None:
        pytest.skip("cake.lowering.runtime exists: see test_verify_schedule_reads_op_from_loader")
    schedule = tmp_path / "k.cake"
    schedule.write_text("schedule k implements row_sum\n")
    assert main(["verify", "--schedule", str(schedule)]) == 2
    assert "schedule loader" in capsys.readouterr().err


def test_verify_schedule_reads_op_from_loader(capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("cake.lowering.runtime") is None:
        pytest.skip("the schedule loader lands with the lowering")
    schedule = CORPUS.parents[2] / "experiments" / "starter" / "row_sum.cake"
    assert main(["verify", "--schedule", str(schedule), *FAST]) == 0  # no --op: read through schedule_op
    assert "row_sum: PASSED" in capsys.readouterr().out


ROW_SUM_SCHEDULE = CORPUS.parents[2] / "experiments" / "starter" / "row_sum.cake"


def test_verify_schedule_binds_params(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify", "--schedule", str(ROW_SUM_SCHEDULE), "--param", "BN=64", "--param", "WARPS=2",
            "--backend", "triton", *FAST]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # The verdict names the kernel it judged, these params and this backend (its cache key is not the defaults').
    assert "row_sum: PASSED" in out and "BN" in out and "64" in out and "backend='triton'" in out


@pytest.mark.parametrize("params, message", [
    (["BN=100"], "E0701"),                      # outside the domain: the lowering's located diagnostic
    (["NOPE=3"], "is not a param of schedule"),
    (["BN=x"], "params are integers"),
    (["BN"], "expected NAME=VALUE"),
    (["BN=64", "BN=128"], "given twice"),
])
def test_verify_schedule_param_errors_exit_2(params: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify", "--schedule", str(ROW_SUM_SCHEDULE), *FAST]
    for binding in params:
        argv += ["--param", binding]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_verify_param_without_schedule_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--op", "row_sum", "--kernel", CONTROL, "--param", "BN=64", *FAST]) == 2
    assert "--param and --backend" in capsys.readouterr().err


def test_replay_reproduces_and_control_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "verdict.json"
    main(["verify", "--op", "row_sum", "--kernel", BUG, *FAST, "--json", str(out_json)])
    failing = next(g for g in json.loads(out_json.read_text())["gates"] if g["status"] == "FAIL")
    capsys.readouterr()
    assert main(["replay", failing["replay_token"], "--kernel", BUG]) == 1
    out = capsys.readouterr().out
    assert f"inputs hash: {failing['evidence']['inputs_hash']}" in out
    assert main(["replay", failing["replay_token"], "--kernel", CONTROL]) == 0  # same bytes, correct kernel


def test_replay_bad_token_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "not-a-token", "--kernel", CONTROL]) == 2
    assert "not a replay token" in capsys.readouterr().err


def test_audit_two_by_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "audit.json"
    assert main(["audit", "--op", "row_sum", CONTROL, BUG, *FAST, "--json", str(out_json)]) == 1
    data = json.loads(out_json.read_text())
    assert data["two_by_two"] == {"standard_pass_contract_pass": 1, "standard_pass_contract_fail": 1,
                                  "standard_fail_contract_pass": 0, "standard_fail_contract_fail": 0}
    assert data["gate_failures"]  # the bug fails at least one gate, counted per gate
    assert "standard check × contract gates" in capsys.readouterr().out


def test_ops_lists_the_starter_contracts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--json"]) == 0
    ops = {row["op"] for row in json.loads(capsys.readouterr().out)}
    assert ops >= {"softmax", "rmsnorm", "row_sum", "matmul", "kmeans_assign", "kmeans_update"}


def test_self_test_prints_the_kill_score_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "selftest.md"
    assert main(["verify", "--self-test", "--op", "row_sum", "--dtypes", "fp32", "--controls", "torch",
                 "--operators", "TAIL-DROP", "MASK-RED-LONG", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "killed by" in out and "| POISON |" in out and "| dropped tail tile | 1 | 1 | 100% |" in out
    assert "row_sum · torch · MASK-RED-LONG: the extra element is read as 0" in report.read_text()


@pytest.mark.parametrize("argv, message", [
    (["--self-test", "--controls", "cuda_graphs"], "unknown control source"),
    (["--self-test", "--operators", "NO-SUCH"], "unknown mutation operator"),
    (["--self-test", "--op", "no_such_op"], "unknown op"),
    (["--op", "row_sum"], "one of --kernel, --schedule or --self-test"),
])
def test_self_test_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", *argv]) == 2
    assert message in capsys.readouterr().err


def test_verify_seeds_runs_each_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "seeds.json"
    assert main(["verify", "--op", "row_sum", "--kernel", CONTROL, *FAST, "--seeds", "0", "1", "2",
                 "--json", str(out_json)]) == 0
    assert "PASSED passed under seeds 0, 1, 2" in capsys.readouterr().out
    data = json.loads(out_json.read_text())
    assert data["seeds"] == [0, 1, 2] and len(data["verdicts"]) == 3
