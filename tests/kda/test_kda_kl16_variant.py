"""scripts/kda_kl16_variant.sh: the decayed keys of a staged-family KDA schedule stored in the input dtype and the
state update one 16-bit product — every substitution takes (the variant checks clean and lowers), and a schedule
whose lines do not match is refused rather than copied."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cake.ir.check import check_text, errors
from cake.ir.nodes import TypeVar
from cake.ir.parser import parse

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kda_kl16_variant.sh"
KDA = ROOT / "experiments" / "kda"


def _variant(schedule: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(schedule)], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("name", ["kda_fused_staged", "kda_fused_varlen"])
def test_the_variant_stores_kl_in_the_input_dtype_and_checks_clean(name: str) -> None:
    made = _variant(KDA / f"{name}.cake")
    assert made.returncode == 0, made.stderr
    kernel = parse(made.stdout, "variant")
    assert kernel.name == f"{name}_kl16"
    assert {s.name: s.type.elem for s in kernel.scratch}["kls"] == TypeVar("E")
    assert "mma(vnT, kl) via dot\n" in made.stdout and "dot.tf32" not in made.stdout.split("launch recur")[1]
    assert not errors(check_text(made.stdout, "variant", backend="triton"))


def test_a_schedule_without_those_lines_is_refused() -> None:
    made = _variant(KDA / "kda_fused_chunkpar.cake")
    assert made.returncode == 2 and "did not take" in made.stderr and made.stdout == ""
