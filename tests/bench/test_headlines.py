"""The headline runner's CPU paths: arguments, worker commands, separate processes (crash and timeout included),
one process's measurement under Triton's interpreter on a scripted clock, and the aggregation into tables
and JSON, with a missing baseline making the speedup undefined end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gpu_headlines as gh
import pytest
import torch
from scripted_clock import with_here

from cake.repeated import aggregate, markdown, process_payload, run_processes
from cake.stats import ProcessSamples


def _payload(index: int, cand_ms: float, base_ms: float, missing: str | None = None) -> dict:
    times = {"cand": [cand_ms + 0.01 * (i % 3) for i in range(12)], "fk": [base_ms] * 12, "hand": [base_ms + 0.2] * 12}
    problems = {}
    if missing is not None:
        del times[missing]
        problems[missing] = "not available: flash-kmeans is not installed"
    return process_payload(index, 0, {"device": "scripted"}, {"op": {"cell": ProcessSamples(times, problems)}},
                           {"op": {"cell": {"triton_assign_config": "BN=256,BK=64,W=4,S=2 (tuned at ...)"}}})


def test_aggregate_gives_intervals_and_undefined_speedups_with_reasons() -> None:
    good = [_payload(i, 1.0 + 0.02 * i, 1.5) for i in range(3)]
    rows = aggregate(good, {"op": ["cand"]}, {"op": ["fk", "hand"]}, seed=0, resamples=500)["op"]["cell"]
    speedup = rows["speedup"]["cand"]
    assert speedup["best_baseline"] == "fk" and speedup["processes"] == 3
    assert speedup["interval"]["low"] <= speedup["value"] <= speedup["interval"]["high"]
    assert rows["time_ms"]["fk"]["point"] == 1.5 and len(rows["per_process_median_ms"]) == 3
    assert rows["notes"][0]["triton_assign_config"].startswith("BN=256")

    lacking = [good[0], _payload(1, 1.0, 1.5, missing="fk"), good[2]]
    bad = aggregate(lacking, {"op": ["cand"]}, {"op": ["fk", "hand"]}, seed=0, resamples=200)["op"]["cell"]
    assert bad["speedup"]["cand"]["value"] is None
    assert bad["speedup"]["cand"]["undefined"] == "fk in process 1: not available: flash-kmeans is not installed"
    assert bad["time_ms"]["fk"] is None  # a baseline missing in one process has no headline time either
    table = markdown({"op": {"cell": bad}}, {"op": ["cand"]}, {"op": ["fk", "hand"]})
    assert "undefined: fk in process 1" in table and "| cell | baseline fk | missing |" in table

    two = aggregate(good[:2], {"op": ["cand"]}, {"op": ["fk"]}, seed=0, resamples=100)["op"]["cell"]
    assert "needs >= 3" in two["speedup"]["cand"]["undefined"]


def test_a_process_that_never_reached_a_shape_is_named() -> None:
    payloads = [_payload(i, 1.0, 1.5) for i in range(3)]
    payloads[2]["ops"]["op"] = {}
    row = aggregate(payloads, {"op": ["cand"]}, {"op": ["fk"]}, seed=0, resamples=100)["op"]["cell"]
    assert row["speedup"]["cand"]["undefined"] == "cand in process 2: process 2 did not reach cell"


def test_separate_processes_run_in_turn_and_a_crash_or_timeout_is_an_outcome(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import json, sys, time
        index, path = int(sys.argv[1]), sys.argv[2]
        if index == 1:
            raise SystemExit("crashed on purpose")
        if index == 2:
            time.sleep(30)
        open(path, "w").write(json.dumps({"process": index}))
    """)

    def command(index: int, payload: Path) -> list[str]:
        return [sys.executable, "-c", script, str(index), str(payload)]

    outcomes = run_processes(command, 3, tmp_path, timeout_s=3.0)
    assert [o.index for o in outcomes] == [0, 1, 2]
    assert outcomes[0].returncode == 0 and outcomes[0].payload is not None
    assert outcomes[1].returncode == 1 and outcomes[1].payload is None and "crashed on purpose" in outcomes[1].tail
    assert outcomes[2].returncode == "timed out after 3 s" and outcomes[2].payload is None
    assert json.loads(outcomes[0].payload.read_text()) == {"process": 0}


def test_arguments_and_the_worker_command() -> None:
    args = gh.parse_args(["--out", "o", "--ops", "kmeans_assign", "--shapes", "cake_cell", "--kernels",
                          "assign_pingpong", "assign_plain_triton", "--processes", "4"])
    assert gh.candidate_names(args) == {"kmeans_assign": ["assign_pingpong", "assign_plain_triton"]}
    command = gh.worker_command(args, 2, Path("o/process_2.json"))
    assert command[1].endswith("scripts/gpu_headlines.py") and command[2:4] == ["--out", "o"]
    joined = " ".join(command)
    assert "--worker 2" in joined and "--shapes cake_cell" in joined and "--kernels assign_pingpong" in joined
    assert "--reps 30" in joined and "--reps 1 " in " ".join(gh.worker_command(args, 0, Path("w.json"), reps=1))
    for bad in (["--shapes", "nope"], ["--kernels", "nope"], ["--processes", "0"]):
        with pytest.raises(SystemExit):
            gh.parse_args(["--out", "o", *bad])
    assert gh.AGAINST["kmeans_assign"] == ("triton_assign", "flash_kmeans", "torch_mm")
    if not torch.cuda.is_available():
        assert gh.main(["--out", "o"]) == 2


def test_aggregate_only_recomputes_the_headlines_from_the_process_payloads(tmp_path: Path) -> None:
    for i in range(3):
        payload = process_payload(i, 0, {}, {"kmeans_update": {"cake_cell": ProcessSamples(
            {"update_onehot": [23.0 + i] * 5, "flash_kmeans": [0.84] * 5, "torch_index_add": [3.0] * 5},
            {"update_atomic": "refused by the quick check: wrong"})}})
        (tmp_path / f"process_{i}.json").write_text(json.dumps(payload))
    rc = gh.main(["--out", str(tmp_path), "--aggregate-only", "--ops", "kmeans_update", "--resamples", "200"])
    assert rc == 0
    data = json.loads((tmp_path / "headlines.json").read_text())
    row = data["headlines"]["kmeans_update"]["cake_cell"]
    assert row["speedup"]["update_onehot"]["value"] == pytest.approx(0.84 / 24.0)
    assert row["speedup"]["update_atomic"]["undefined"].startswith("update_atomic in process 0: refused")
    assert "| cake_cell | update_onehot | 24.000 [23.000, 25.000] |" in (tmp_path / "headlines.md").read_text()


WORKER = textwrap.dedent("""
    import json
    from cake.arch import DEVICES
    from cake.evaluation.bench import load_baselines
    from cake.experiments.kmeans import triton_assign as ta
    from cake.experiments.kmeans.workload import ASSIGN
    from gpu_headlines import measure_shape
    from cake.repeated import aggregate, process_payload
    from cake.verifier.timing import Verification

    from scripted_clock import Tick  # tests/bench, on PYTHONPATH

    baselines, missing = load_baselines(ASSIGN, ["triton_assign", "flash_kmeans", "torch_mm"])
    kernels = [("hand_at_16", lambda x, c: ta.assign(x, c, ta.Config(16, 16, 4, 2)), Verification(True, "test", ""))]
    payloads = []
    for worker in range(3):
        samples, notes = measure_shape(ASSIGN, ASSIGN.cpu_shape, kernels, {}, baselines, missing, Tick(),
                                       DEVICES["H200"], seed=0, worker=worker, reps=3, max_seconds=60.0, on="cpu")
        payloads.append(process_payload(worker, 0, {}, {"kmeans_assign": {"cpu_tiny": samples}},
                                        {"kmeans_assign": {"cpu_tiny": notes}}))
    full = aggregate(payloads, {"kmeans_assign": ["hand_at_16"]},
                     {"kmeans_assign": ["triton_assign", "flash_kmeans", "torch_mm"]}, seed=0, resamples=100)
    present = aggregate(payloads, {"kmeans_assign": ["hand_at_16"]},
                        {"kmeans_assign": ["triton_assign", "torch_mm"]}, seed=0, resamples=100)
    print(json.dumps({"missing": [m[0] for m in missing], "payload": payloads[0], "full": full, "present": present}))
""")


def test_one_process_measures_a_shape_under_the_interpreter_and_a_missing_baseline_is_undefined() -> None:
    scripts = str(Path(__file__).resolve().parents[2] / "scripts")  # the worker's code is a script's function
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": with_here(scripts, os.environ.get("PYTHONPATH"))}
    proc = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    if torch.cuda.is_available():
        pytest.skip("flash-kmeans may be available here")
    assert data["missing"] == ["flash_kmeans"]
    entry = data["payload"]["ops"]["kmeans_assign"]["cpu_tiny"]
    assert sorted(entry["times_ms"]) == ["hand_at_16", "torch_mm", "triton_assign"]
    assert all(len(v) == 3 for v in entry["times_ms"].values())  # every sample kept, rep-paired
    assert entry["problems"]["flash_kmeans"].startswith("not available: flash-kmeans is not installed")
    assert "untuned default" in entry["notes"]["triton_assign_config"]
    full = data["full"]["kmeans_assign"]["cpu_tiny"]["speedup"]["hand_at_16"]
    assert full["value"] is None and full["undefined"].startswith("flash_kmeans in process 0: not available")
    present = data["present"]["kmeans_assign"]["cpu_tiny"]["speedup"]["hand_at_16"]
    assert present["value"] == pytest.approx(1.0) and present["processes"] == 3  # the scripted clock: 1 ms each
