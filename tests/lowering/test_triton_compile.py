"""Every schedule the Triton backend accepts compiles for its GPU target with Triton's real compiler (down to a
cubin), without a GPU: the interpreter never compiles, and a kernel that interprets correctly can still fail
the compiler. A compile error maps back to the schedule line that produced the failing code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lowering_cases import FIXTURES, REPO, fixture_schedules, shipped_schedules

from cake.arch import ARCHS

SCRIPT = Path(__file__).resolve().parent / "aot_compile_all.py"
BAD = FIXTURES / "bad" / "atomic_max_f16.cake"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton-cache"))
    paths = [str(p) for p in shipped_schedules() + fixture_schedules() + [BAD]]
    proc = subprocess.run([sys.executable, str(SCRIPT), *paths], capture_output=True, text=True, env=env,
                          timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_every_accepted_schedule_compiles_for_its_target(compiled: list[dict[str, object]]) -> None:
    rows = [r for r in compiled if not str(r["schedule"]).endswith(BAD.name)]
    assert any("assign_plain" in str(r["schedule"]) for r in rows)
    errors = [f"{r['schedule']} {r['dtype']} {r['dims']}:\n{r['error']}" for r in rows if "error" in r]
    assert not errors, "\n\n".join(errors)
    limit = ARCHS["sm_90a"].registers_per_thread_max
    for row in rows:
        for launch in row["launches"]:  # type: ignore[attr-defined]
            assert launch["registers"] is None or launch["registers"] <= limit, row


@pytest.mark.slow
def test_compile_error_points_at_the_schedule_line(compiled: list[dict[str, object]]) -> None:
    rows = {r["dtype"]: r for r in compiled if str(r["schedule"]).endswith(BAD.name)}
    assert "launches" in rows["torch.float32"], "fp32 has an atomic max: it compiles"
    error = str(rows["torch.float16"]["error"])
    assert error.startswith("error[E0704]: Triton could not compile the generated kernel: atomic_max does not support fp16")
    assert f"--> {BAD}:17:3" in error or f"{BAD.name}:17:3" in error
    assert "atomic max max(xt, axis=0) -> y[i]" in error
    assert "site-packages" not in error, "no internal path in a diagnostic"
