"""Test-wide setup: `scripts/` on sys.path, so tests can import a benchmark script's functions; `ray_local`, a
local Ray for the executor and experiment tests; `compiled_rows`, what a script that compiles for a GPU target prints.

Scripts live outside every package (they are run as files, never installed); the few tests that check a
script's logic (the cost-model fit, the benchmark's candidate enumeration) import it by its file name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Triton reads TRITON_INTERPRET when it defines kernels, its own library functions included, at import — and
# importing torch imports Triton (torch's native Triton ops). This conftest is the first module pytest loads, so
# the variable is set here, before any test module imports torch: every Triton kernel a CPU test runs is
# interpreted. (Processes that must compile without it — the AOT tests — build their own environment.)
os.environ.setdefault("TRITON_INTERPRET", "1")

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


# ------------------------------------------------------------------------------------------- Ray

TESTS = Path(__file__).resolve().parent
RAY_CPUS = 2  # a local Ray with 2 CPU workers, started once per test session by the tests that ask for it
RAY_WORKER_PATHS = (TESTS / "evaluation", TESTS / "agents")  # ray_doubles, fake_toolchain: importable by workers


# The test doubles the executor and experiment tests import, here and in Ray's workers (no folder conftest:
# tests import `conftest` by name, so a second one would shadow the agents').
for _path in RAY_WORKER_PATHS:
    if str(_path) not in sys.path:
        sys.path.append(str(_path))


@pytest.fixture(scope="session")
def ray_local() -> Iterator[object]:
    ray = pytest.importorskip("ray")
    pythonpath = os.pathsep.join([*map(str, RAY_WORKER_PATHS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, logging_level="WARNING", log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    try:
        yield ray
    finally:
        ray.shutdown()


# ------------------------------------------------------------------------------------------- AOT compiles


@pytest.fixture
def compiled_rows(tmp_path: Path) -> Callable[[Path], list[dict[str, object]]]:
    """Runs a script that compiles Triton kernels for a GPU target (no GPU needed) and prints one JSON object a
    line, and returns those objects: in a process without TRITON_INTERPRET (Triton cannot compile what it was told
    to interpret), with a Triton cache of the test's own."""

    def run(script: Path) -> list[dict[str, object]]:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                              cwd=TESTS.parent)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [json.loads(line) for line in proc.stdout.splitlines()]

    return run
