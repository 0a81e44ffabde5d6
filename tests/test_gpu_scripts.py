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
