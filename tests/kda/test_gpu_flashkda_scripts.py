"""The CPU paths of FlashKDA's GPU stage files: scripts/gpu/flashkda_build.sh refuses missing sources and an
ambiguous carried wheel before compiling anything, and scripts/gpu/s7_fkda7.sh parses, runs only scripts and
kernels that exist, and keeps its stages within its 300 s."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "gpu" / "flashkda_build.sh"
STAGES = ROOT / "scripts" / "gpu" / "s7_fkda7.sh"
SOURCE = ROOT / "experiments" / "kda" / "flashkda_source.json"
NEEDED = ("setup.py", "flash_kda/__init__.py", "csrc/flash_kda.cpp", "csrc/smxx/fwd_launch.cu",
          "cutlass/include/cute/tensor.hpp", "cutlass/tools/util/include/cutlass/util/device_memory.h")


def _build(src: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLASHKDA_SRC": str(src), "FLASHKDA_SITE": str(tmp_path / "site")}
    return subprocess.run(["bash", str(BUILD)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_build_refuses_missing_sources_and_says_how_to_fill_them(tmp_path: Path) -> None:
    done = _build(tmp_path / "empty", tmp_path)
    assert done.returncode == 3
    assert "setup.py is missing" in done.stderr and "flashkda_source.json" in done.stderr


def test_the_build_refuses_two_carried_wheels(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for need in NEEDED:
        (src / need).parent.mkdir(parents=True, exist_ok=True)
        (src / need).write_text("")
    (src / "dist").mkdir()
    for version in ("0.0.1+a", "0.0.1+b"):
        (src / "dist" / f"flash_kda-{version}-cp312-cp312-linux_x86_64.whl").write_text("")
    done = _build(src, tmp_path)
    assert done.returncode == 3 and "keep one" in done.stderr


def test_the_source_record_names_the_commits_the_build_reads() -> None:
    record = json.loads(SOURCE.read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"]) and re.fullmatch(r"[0-9a-f]{40}", record["cutlass"]["commit"])
    assert record["build"]["env"]["FLASH_KDA_CUDA_ARCHS"] == "90a"
    assert "FLASH_KDA_VERSION_SUFFIX" not in record["build"]["env"]  # a '+' in the wheel's name: $OUT drops it
    assert set(record["cutlass"]["paths"]) >= {"include", "tools/util/include", "examples/common"}


def test_the_stage_file_parses_and_runs_what_exists() -> None:
    assert subprocess.run(["bash", "-n", str(STAGES)], check=False).returncode == 0
    assert subprocess.run(["bash", "-n", str(BUILD)], check=False).returncode == 0
    text = STAGES.read_text()
    assert text.count("source scripts/gpu/lib.sh") == 1 and "budget 300" in text
    for path in re.findall(r"(scripts/\S+\.(?:py|sh))", text):
        assert (ROOT / path).is_file(), path
    (target,) = re.findall(r"--kernel (experiments/\S+\.py):(\w+)", text)
    assert (ROOT / target[0]).is_file()
    from cake.experiments.kda.audit_targets import TARGETS

    assert target[1] in TARGETS


@pytest.mark.parametrize("stage", ["fkda7_build", "fkda7_smoke", "fkda7_verify", "fkda7_bench"])
def test_every_stage_is_budgeted(stage: str) -> None:
    assert re.search(rf"^budgeted {stage} \d+ \d+ ", STAGES.read_text(), re.M), stage
