"""A bug in CAKE (a check, a pass, a generator crashing) is an internal error: exit 3 with a report, and in the
evolve loop an `error: internal` candidate (tests/agents/test_loop.py) — never a diagnostic, a rejection or a
low score."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.ir.checks.fixtures import PINGPONG
from cake.ir.checks.registry import CheckSpec, Family, all_checks
from cake.ir.parser import parse
from cake.lowering.pipeline import LowerContext, Pass, run_passes

from cake.cli import main
from cake.cli.common import ExitCode
from cake.errors import InternalError


def _crash(ctx):  # a check with a bug in it
    return [ctx.kernel.launches[99]]


BROKEN = CheckSpec("E0998", "a check with a bug", "{x}", Family.SYNC, _crash, ())


@pytest.fixture
def broken_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cake.ir.check.all_checks", lambda: (*all_checks(), BROKEN))


@pytest.mark.parametrize("command", ["check", "lower"])
def test_cake_check_and_lower_exit_3_naming_the_failing_check(
        broken_checker: None, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pingpong.cake"
    path.write_text(PINGPONG)
    assert main([command, str(path)]) == ExitCode.INTERNAL == 3
    err = capsys.readouterr().err
    assert "internal error in CAKE (check E0998 (a check with a bug)): IndexError" in err
    assert "bug in CAKE, not in the schedule" in err and "schedule pingpong implements" in err
    assert "error[" not in err and "Traceback" not in err


def test_a_crashing_pass_names_itself_and_carries_its_input() -> None:
    def boom(kernel, ctx):
        raise KeyError("no such stage")

    kernel = parse(PINGPONG, "t.cake")
    with pytest.raises(InternalError) as info:
        run_passes(kernel, [Pass("boom", boom, "crashes")], LowerContext("triton", "sm_90a"))
    assert info.value.stage == "pass boom" and "KeyError" in info.value.cause
    assert parse(info.value.schedule or "", "again.cake") == kernel
