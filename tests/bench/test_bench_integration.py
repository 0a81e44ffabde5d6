"""The bench glue with a real CAKE schedule, lowered by the Triton backend and run under its CPU interpreter.

Runs in a subprocess because TRITON_INTERPRET must be set before Triton is imported. The clock is scripted
(one tick per call): this checks the plumbing (lower, load, check, interleave, re-check), never a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from scripted_clock import with_here

SCRIPT = textwrap.dedent("""
    import json, torch
    from cake.arch import DEVICES
    from cake.evaluation.bench import bench_shape
    from cake.experiments.kmeans.baselines import torch_assign_mm
    from cake.experiments.kmeans.workload import ASSIGN, FOLDER
    from cake.experiments.schedules import load_any_backend
    from cake.experiments.workload import Prepared
    from cake.verifier.timing import TimingConfig, Verification

    from scripted_clock import Tick  # tests/bench, on PYTHONPATH

    backend, plain = load_any_backend(FOLDER / "assign_plain.cake", {"BN": 32, "BK": 16, "STAGES": 2, "WARPS": 4})
    report = bench_shape(ASSIGN, ASSIGN.cpu_shape, [("assign_plain", plain, Verification(True, "test", ""))],
                         [("torch_mm", Prepared(run=torch_assign_mm))], Tick(),
                         TimingConfig(warmup_calls=1, min_reps=2, max_reps=2), DEVICES["H200"], device="cpu", pool=2)
    print(json.dumps({"backend": backend, "report": report.to_json()}))
""")


def test_a_lowered_schedule_goes_through_the_bench_glue() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": with_here(os.environ.get("PYTHONPATH"))}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["backend"] == "triton"
    by_name = {m["name"]: m for m in data["report"]["measurements"]}
    assert by_name["assign_plain"]["failure"] is None and by_name["assign_plain"]["reps"] == 2
    assert by_name["torch_mm"]["failure"] is None
