"""Ray, started once for this folder's tests: a local instance with 2 CPUs, its workers able to import the
evaluator doubles (ray_doubles.py) and the loop's test toolchain."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
AGENTS = HERE.parent / "agents"
SEED = HERE.parents[1] / "experiments" / "kmeans" / "assign_plain.cake"
RAY_CPUS = 2

for path in (HERE, AGENTS):  # ray_doubles, fake_toolchain, loopback_server
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


@pytest.fixture(scope="session")
def ray_local() -> Iterator[object]:
    ray = pytest.importorskip("ray")
    pythonpath = os.pathsep.join([str(HERE), str(AGENTS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, logging_level="WARNING", log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    try:
        yield ray
    finally:
        ray.shutdown()
