"""The sm_90a compile of a KDA schedule for its slow tests: `aot_compile_kda.py` runs Triton's real pipeline down to a
cubin in a process without TRITON_INTERPRET (the compiler cannot run under it), the compile an H200's first call
makes, at the benchmark's K = V = 128 in bf16 and a tail in f16."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cake.arch import ARCHS

SCRIPT = Path(__file__).resolve().parent / "aot_compile_kda.py"


def compiled_rows(schedule: Path, params: str | None = None, *, timeout: int) -> list[dict[str, Any]]:
    """One row per compiled case (two), each checked: no error, the launches intra then recur, every launch within
    sm_90a's registers a thread. `params` is a JSON object of params over the schedule's defaults."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    argv = [sys.executable, str(SCRIPT), str(schedule)] + ([params] if params is not None else [])
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 2 and not [r["error"] for r in rows if "error" in r]
    limit = ARCHS["sm_90a"].registers_per_thread_max
    for row in rows:
        assert [u["launch"] for u in row["launches"]] == ["intra", "recur"]
        assert all(u["registers_per_thread"] <= limit for u in row["launches"]), row
    return rows
