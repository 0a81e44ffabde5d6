"""The evaluator doubles (tests/evaluation/ray_doubles.py) on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

for path in (Path(__file__).resolve().parents[1] / "evaluation",):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
