"""Test-wide setup: `scripts/` on sys.path, so tests can import a benchmark script's functions.

Scripts live outside every package (they are run as files, never installed); the few tests that check a
script's logic (the cost-model fit, the benchmark's candidate enumeration) import it by its file name.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
