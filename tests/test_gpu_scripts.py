"""Every H200 session script (scripts/gpu/*.sh) parses as bash and names only scripts and schedules that exist (or
that it writes itself): a device call is minutes of a budget, and a typo found there costs a machine start."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts" / "gpu").glob("*.sh"))
RUN = re.compile(r"(?:python3 |bash |source )((?:scripts|experiments)/[\w./-]+)")
SCHEDULE = re.compile(r"((?:experiments|ir/examples)/[\w/-]+\.cake)")
WRITTEN = re.compile(r">\s*((?:experiments|ir/examples|scripts)/[\w./-]+)")


def _code(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))


def test_there_are_scripts_to_check() -> None:
    assert len(SCRIPTS) > 50


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_a_gpu_script_parses_and_names_only_files_that_exist(script: Path) -> None:
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, parsed.stderr
    code = _code(script)
    written = set(WRITTEN.findall(code))
    named = set(RUN.findall(code)) | set(SCHEDULE.findall(code))
    missing = sorted(p for p in named - written if not (ROOT / p).exists())
    assert not missing, f"{script.name} names {missing}, which do not exist"


def _budget_shell(body: str, tmp_path: Path) -> list[str]:
    """Run `body` after lib.sh's budget functions (only those: the rest of lib.sh installs wheels)."""
    lib = (ROOT / "scripts" / "gpu" / "lib.sh").read_text().splitlines()
    start = next(i for i, line in enumerate(lib) if line.startswith("budget() {"))
    end = next(i for i, line in enumerate(lib) if line.startswith("budgeted() {"))
    script = "\n".join([f"RES={tmp_path}", *lib[start:end], body])
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.split()


def test_a_budget_ends_at_the_callers_deadline_and_keeps_its_reserve(tmp_path: Path) -> None:
    # no deadline: the cap; a reserve is held back from what is left, only while it is set (a second may tick)
    cap, reserved, left = map(int, _budget_shell("budget 900; echo $BUDGET_S; BUDGET_RESERVE=170 budget_left; "
                                                 "budget_left", tmp_path))
    assert cap == 900 and 729 <= reserved <= 730 and 899 <= left <= 900
    # a deadline nearer than the cap ends the budget there (a machine that took long to start)
    (until_deadline,) = map(int, _budget_shell("BUDGET_DEADLINE=$(( $(date +%s) + 500 )) budget 900 >/dev/null; "
                                               "echo $BUDGET_S", tmp_path))
    assert 499 <= until_deadline <= 500
    # a deadline further off than the cap changes nothing; one already past is reported and ignored
    assert _budget_shell("BUDGET_DEADLINE=$(( $(date +%s) + 5000 )) budget 900 >/dev/null; echo $BUDGET_S",
                         tmp_path) == ["900"]
    assert _budget_shell("BUDGET_DEADLINE=$(( $(date +%s) - 5 )) budget 900 >/dev/null; echo $BUDGET_S",
                         tmp_path) == ["900"]
    assert "ignored" in (tmp_path / "stages.txt").read_text()
