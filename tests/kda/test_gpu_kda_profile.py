"""The CPU path of scripts/gpu_kda_profile.py: several `--params` variants of one schedule are lowered and named
apart in one dry run (the GPU stage ranks them in one process), and a bad variant fails on the CPU."""

from __future__ import annotations

from pathlib import Path

import gpu_kda_profile as profile
import pytest
from cake.lowering.runtime import ScheduleError


def test_each_params_variant_is_lowered_and_named_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert profile.main(["--out", str(tmp_path / "p.json"), "--dry-run",
                         "--params", '{"BV": 16}', '{"BV": 64, "WARPS_RECUR": 8}']) == 0
    listed = capsys.readouterr().out
    assert "'kda_fused_chunkpar {\"BV\": 16}'" in listed and "'kda_fused_chunkpar {\"BV\": 64, \"WARPS_RECUR\": 8}'" in listed


def test_without_params_the_variant_is_the_schedule_itself() -> None:
    assert profile.variant_name("kda_fused_chunkpar", None) == "kda_fused_chunkpar"


def test_a_value_outside_a_params_domain_fails_on_the_cpu(tmp_path: Path) -> None:
    with pytest.raises(ScheduleError, match="48 not in"):
        profile.main(["--out", str(tmp_path / "p.json"), "--dry-run", "--params", '{"BV": 48}'])
