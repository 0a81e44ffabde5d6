"""`cake lower`: output, -o, --param, --dump-after, --list-passes, and its exit codes."""

from __future__ import annotations

import pytest
from lowering_cases import FIXTURES, REPO

from cake.cli import main

MATMUL = str(FIXTURES / "matmul_cp_async.cake")
PINGPONG = str(REPO / "experiments" / "kmeans" / "assign_pingpong.cake")


def test_prints_the_generated_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", MATMUL]) == 0
    out = capsys.readouterr().out
    assert out.count("@triton.jit") == 1 and "def matmul_cp_async(a, b, *, out=None, workspace=None):" in out
    assert "for k in range(0, tl.cdiv(K, BK)):  # pipelined: the launch's num_stages" in out
    assert "num_stages=3," in out  # the launch's (STAGES = 3)
    assert 'tl.dot(at, bs, acc=acc, input_precision="ieee")' in out


def test_writes_the_file_and_binds_params(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "mm.py"
    assert main(["lower", MATMUL, "--param", "BM=64", "--param", "STAGES=4", "-o", str(out)]) == 0
    text = out.read_text()
    assert "BM = 64\n" in text and "STAGES = 4\n" in text and "BN = 32\n" in text
    assert capsys.readouterr().out == ""


def test_dump_after_a_pass_prints_the_ir(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", MATMUL, "--dump-after", "registerize_smem"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# IR after registerize_smem\nschedule matmul_cp_async implements matmul")
    assert "let bs: T[BK, BN] = load b[k * BK : +BK, j * BN : +BN] masked" in out
    assert "\nsmem " not in out and "@triton.jit" not in out


def test_dump_after_emit_prints_the_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", MATMUL, "--dump-after", "emit"]) == 0
    assert "@triton.jit" in capsys.readouterr().out


def test_list_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", "--list-passes"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["bind_params", "check", "registerize_smem", "emit"]


def test_a_refused_schedule_is_a_finding(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", PINGPONG]) == 1
    err = capsys.readouterr().err
    assert "error[E0601]: Triton cannot express warp specialization" in err
    assert "assign_pingpong.cake:68:3" in err


@pytest.mark.parametrize("argv", [
    ["lower", MATMUL, "--param", "BM=x"],
    ["lower", MATMUL, "--param", "=3"],
    ["lower", MATMUL, "--dump-after", "no_such_pass"],
    ["lower", MATMUL, "--arch", "sm_75"],
    ["lower", MATMUL, "--backend", "no-such-backend"],
    ["lower", "/no/such/file.cake"],
    ["lower"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "cake lower: error:" in capsys.readouterr().err


def test_a_param_outside_its_domain_is_a_finding(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", MATMUL, "--param", "BM=48"]) == 1
    assert "error[E0701]: param `BM` = 48 is outside its domain" in capsys.readouterr().err
