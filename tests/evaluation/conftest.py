"""The evaluator doubles (ray_doubles.py) and the loop's test toolchain (tests/agents) on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = HERE.parents[1] / "experiments" / "kmeans" / "assign_plain.cake"

for path in (HERE, HERE.parent / "agents"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
