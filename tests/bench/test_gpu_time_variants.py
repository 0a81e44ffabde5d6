"""The GPU variant-timing script's CPU paths: the plan (legal, distinct, dealt into runs), the pool (a crash or a
hang is a verdict, never a dead session) with a scripted worker, the run stores the fitter reads, the dry run."""

from __future__ import annotations

import json
import os
import time
from multiprocessing.connection import Connection
from pathlib import Path

import cost_data
import gpu_time_variants as gtv
import pytest
from cake.ir.check import check, errors
from cake.ir.parser import parse
from cake.lowering.backend import get_backend
from cake.lowering.cuda.program import CODEGEN_VERSION

from cake.runs.store import CandidateStatus, RunStore

PLAIN = Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / "assign_plain.cake"


@pytest.fixture
def small_schedule(tmp_path: Path) -> Path:
    """assign_plain with a small param grid, so the plan takes seconds."""
    text = PLAIN.read_text()
    for old, new in (("in {32, 64, 128, 256}", "in {64, 128}"), ("in {16, 32, 64, 128}", "in {32, 64}"),
                     ("in 1 .. 6", "in 1 .. 3"), ("in {2, 4, 8}", "in {4}")):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "assign_small.cake"
    path.write_text(text)
    return path


def test_the_plan_deals_legal_distinct_variants_into_runs(small_schedule: Path) -> None:
    plan = gtv.plan([small_schedule], runs=3, seed=5)
    assert plan == gtv.plan([small_schedule], runs=3, seed=5)  # seeded
    for backend in gtv.BACKENDS:
        mine = [j for j in plan.jobs if j.backend == backend]
        assert len(mine) >= 6 and len({j.ir_hash for j in mine}) == len(mine)
        sizes = [sum(1 for j in mine if j.run == r) for r in range(3)]
        assert max(sizes) - min(sizes) <= 1
        for job in mine[:4]:
            assert not errors(check(parse(job.text), arch=gtv.ARCH, backend=backend, dims=gtv.TIMING_DIMS))
            assert job.predicted_ms > 0
    assert len({j.id for j in plan.jobs}) == len(plan.jobs)


def scripted_worker(conn: Connection, seed: int) -> None:
    """Stands in for `gpu_worker` (no GPU here): job id % 5 decides what happens to the variant."""
    conn.send(("hello", "NVIDIA H200", {"triton": "triton-3.6.0+torch-2.11.0", "cuda": "nvcc-13.0.88+torch-2.11.0"}))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg[0] == "load":
            job = msg[1]
            if job.id % 5 == 0:
                os._exit(7)  # a kernel that takes the process down
            if job.id % 5 == 2:
                conn.send(("loaded", job.id, ("wrong", "planted mismatch"), False))
                continue
            if job.id % 5 == 4:  # raised, and left the context broken: the pool must replace the worker
                conn.send(("loaded", job.id, ("raised", "RuntimeError: an illegal memory access"), True))
                continue
            conn.send(("loaded", job.id, None, False))
        else:
            if msg[1] % 5 == 1:
                time.sleep(60)  # a hang: the pool must kill it
            conn.send(("timed", msg[1], tuple(0.5 + 0.01 * msg[1] + 0.001 * i for i in range(5)), None, False))


def test_the_pool_turns_crashes_and_hangs_into_verdicts_and_writes_runs(small_schedule: Path,
                                                                        tmp_path: Path) -> None:
    plan = gtv.plan([small_schedule], runs=2, seed=0)
    stores = gtv.Stores(tmp_path / "out", plan, 2, 0, gtv.TIMING_DIMS, "graph")
    cfg = gtv.PoolConfig(workers=2, budget_s=60, load_limit_s=10, time_limit_s=1.0, start_limit_s=30)
    result = gtv.run_pool(plan.jobs, cfg, target=scripted_worker, context="fork", on_hello=stores.open,
                          on_outcome=stores.record)
    stores.close()
    verdicts = {j.id: result.outcomes[j.id].verdict for j in plan.jobs}
    expected = {0: "crashed", 1: "timeout", 2: "wrong", 3: "timed", 4: "raised"}
    assert verdicts == {i: expected[i % 5] for i in verdicts}
    assert result.device == "NVIDIA H200"
    assert result.worker_restarts == sum(1 for i in verdicts if i % 5 in (0, 1, 4))
    assert "exit code 7" in result.outcomes[0].detail
    # Every variant is a candidate of its run; outcomes are evaluations; the fitter reads the timed ones.
    runs = sorted((tmp_path / "out" / "runs").iterdir())
    assert [r.name for r in runs] == ["cuda-0", "cuda-1", "triton-0", "triton-1"]
    with RunStore.open_read_only(runs[0]) as store:
        assert store.config["device"] == "NVIDIA H200" and store.config["eval"] == {"backend": "cuda"}
        assert store.config["codegen"] == CODEGEN_VERSION and store.config["clock"] == "graph"
        rows = store.candidates()
        assert {r.status for r in rows} <= {CandidateStatus.PASSED, CandidateStatus.FAILED}
        assert any(r.evaluation and (r.evaluation.error or "").startswith("crashed: worker died") for r in rows)
        assert all(r.evaluation is not None for r in rows)
    loaded = cost_data.load_sources(runs)
    timed = [j for j in plan.jobs if verdicts[j.id] == "timed"]
    assert len(loaded.samples) == len(timed) and not loaded.assumptions
    # The key holds the backend's codegen version and the clock the run recorded (no assumption needed).
    assert {str(s.key) for s in loaded.samples} == {
        f"cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-{CODEGEN_VERSION}+graph",
        f"triton/H200/triton-3.6.0+torch-2.11.0+codegen-{get_backend('triton').codegen_version}+graph"}


def test_the_time_guard_leaves_the_rest_queued(small_schedule: Path) -> None:
    plan = gtv.plan([small_schedule], runs=1, seed=0)
    cfg = gtv.PoolConfig(workers=1, budget_s=0.0, load_limit_s=10, time_limit_s=1.0, start_limit_s=30)
    result = gtv.run_pool(plan.jobs, cfg, target=scripted_worker, context="fork")
    assert {o.verdict for o in result.outcomes.values()} == {"not reached"}


def test_the_dry_run_lowers_every_variant_and_times_nvcc(small_schedule: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gtv, "assign_schedules", lambda: [small_schedule])
    assert gtv.main(["--out", str(tmp_path), "--dry-run", "--compile-sample", "1"]) == 0
    report = json.loads((tmp_path / "gpu_time_variants_plan.json").read_text())
    assert sum(report["jobs_per_run"].values()) == len(report["jobs"]) > 0
    rate = report["cpu_rate"]
    assert rate["lower_s_mean"]["triton"] > 0 and rate["lower_s_mean"]["cuda"] > 0
    assert rate["nvcc_compiles"] == 1 and not rate["nvcc_failures"]


def real_worker_on_the_cpu(schedule: Path) -> None:
    """`gpu_worker` itself, under Triton's interpreter at tiny shapes with a scripted clock (forked, so the
    settings below reach it): the protocol the GPU run depends on, end to end with a real lowered kernel. Run
    in a fresh interpreter by the test: a fork from a pytest worker that has already run torch's thread pools
    can inherit a held lock and hang (it did, in the full suite)."""
    from scripted_clock import Tick

    gtv.WORKER_DEVICE = "cpu"
    gtv._clock = Tick
    gtv.DTYPE = "f32"  # the interpreter's bf16 dot is not the GPU's
    gtv.WARM_DIMS = {"B": 1, "N": 20, "K": 9, "D": 128}
    gtv.TIMING_DIMS = {"B": 1, "N": 16, "K": 8, "D": 128}
    plan = gtv.plan([schedule], runs=1, seed=0)
    jobs = [next(j for j in plan.jobs if j.backend == "triton"), next(j for j in plan.jobs if j.backend == "cuda")]
    cfg = gtv.PoolConfig(workers=1, budget_s=120, load_limit_s=120, time_limit_s=120, start_limit_s=60)
    result = gtv.run_pool(jobs, cfg, context="fork")
    triton, cuda = (result.outcomes[j.id] for j in jobs)
    assert triton.verdict == "timed" and len(triton.times_ms) >= 5, triton
    assert cuda.verdict != "timed"  # a CUDA kernel cannot run on a CPU: a verdict, not a dead pool
    assert result.device == "cpu" and set(result.toolchains) == {"triton", "cuda"}


def test_the_real_worker_loads_checks_and_times_a_triton_variant_on_the_cpu(small_schedule: Path) -> None:
    import subprocess
    import sys

    here = Path(__file__).resolve().parent
    path = os.pathsep.join([str(here), str(here.parents[1] / "scripts"), os.environ.get("PYTHONPATH", "")])
    code = f"import test_gpu_time_variants as t; from pathlib import Path; t.real_worker_on_the_cpu(Path({str(small_schedule)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": path, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]


def stalling_worker(conn: Connection, seed: int) -> None:
    """Compiles forever: the drain must end it without waiting for the per-variant limit."""
    conn.send(("hello", "NVIDIA H200", {"triton": "t", "cuda": "c"}))
    while conn.recv() is not None:
        time.sleep(60)


def test_variants_in_flight_past_the_drain_are_stopped_not_awaited(small_schedule: Path) -> None:
    plan = gtv.plan([small_schedule], runs=1, seed=0)
    cfg = gtv.PoolConfig(workers=1, budget_s=1.0, load_limit_s=50, time_limit_s=50, drain_s=0.5, start_limit_s=30)
    result = gtv.run_pool(plan.jobs, cfg, target=stalling_worker, context="fork")
    first = result.outcomes[plan.jobs[0].id]
    assert first.verdict == "not reached" and "stopped in flight" in first.detail
    assert {result.outcomes[j.id].verdict for j in plan.jobs[1:]} == {"not reached"}
    assert result.seconds < 20 and result.worker_restarts == 0


def test_only_keeps_the_named_variants_of_one_backend(small_schedule: Path) -> None:
    names = {"assign_small:BN=64 BK=32 STAGES=2 WARPS=4", "assign_small:BN=128 BK=64 STAGES=1 WARPS=4"}
    plan = gtv.plan([small_schedule], runs=1, seed=0, only=names, backends=("cuda",))
    assert plan.named == names and plan.variants == 2
    assert sorted(gtv.variant_key(j.schedule, j.label) for j in plan.jobs) == sorted(names)
    assert {j.backend for j in plan.jobs} == {"cuda"}


def test_an_only_name_that_matches_nothing_is_a_usage_error(small_schedule: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gtv, "assign_schedules", lambda: [small_schedule])
    with pytest.raises(SystemExit) as exit_:
        gtv.main(["--out", str(tmp_path), "--dry-run", "--only", "assign_small:BN=64 WARPS=3"])
    assert exit_.value.code == 2 and "assign_small:BN=64 WARPS=3" in capsys.readouterr().err


def test_the_warps5_stage_names_cuda_variants_the_checker_accepts() -> None:
    """scripts/gpu/s5_warps5.sh re-checks named variants: every name must plan (a typo would cost the GPU call)."""
    import shlex

    stage = (Path(__file__).resolve().parents[2] / "scripts" / "gpu" / "s5_warps5.sh").read_text()
    words = shlex.split(stage.split("stage warps5_recheck", 1)[1].split("\ncat ", 1)[0], comments=True)
    names = {words[i + 1] for i, w in enumerate(words) if w == "--only"}
    assert len(names) == 7 and sum("WARPS=8" in n for n in names) == 5
    plan = gtv.plan(gtv.assign_schedules(), runs=1, seed=0, only=names, backends=("cuda",))
    assert plan.named == names and not plan.refused
    assert sorted(gtv.variant_key(j.schedule, j.label) for j in plan.jobs) == sorted(names)


def test_poison_fills_outputs_with_values_no_kernel_writes() -> None:
    import torch

    ids, dist = torch.zeros(4, dtype=torch.int32), torch.zeros(3)
    gtv.poison((ids, dist))
    assert ids.tolist() == [torch.iinfo(torch.int32).min] * 4 and torch.isnan(dist).all()
    one = torch.ones(2, dtype=torch.int64)
    gtv.poison(one)
    assert (one < 0).all()
