"""The Ray executor on a local Ray with 2 CPU workers: the same run as the local pool, a worker killed
mid-evaluation is retried (and recorded), a hung evaluation is cancelled and frees its slot."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.offline import OfflineAgent
from fake_toolchain import FakeToolchain
from ray_doubles import DiesOnce, Hangs, ModelEvaluator

from cake.evaluation.executors import LocalPoolExecutor
from cake.evaluation.protocol import EvalJob, Evaluator, Executor
from cake.runs.store import CandidateStatus, RunStore

SEED = Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / "assign_plain.cake"
SETTINGS = LoopSettings(turns=3, proposals_per_turn=8, evals_per_turn=2, seed=5)


def _run(root: Path, make: type | object, evaluator: Evaluator, settings: LoopSettings = SETTINGS) -> RunStore:
    store = RunStore.create(root, {"loop": settings.to_json()})
    executor: Executor = make(evaluator)  # type: ignore[operator]
    try:
        EvolutionLoop(store, OfflineAgent(), FakeToolchain(SEED), settings, [SEED], executor=executor).run()
    finally:
        executor.close()
    return store


def _sequence(store: RunStore) -> list[tuple[object, ...]]:
    """Each candidate as proposed and judged: the verdict, fitness and status, not where or how long."""
    out = []
    for c in store.candidates():
        ev = c.evaluation
        out.append((c.id, c.turn, c.ir_hash, c.mutation, c.status.value,
                    (ev.verdict, ev.fitness, ev.fitness_kind, ev.error) if ev else None))
    return out


def _ray(**options: object):  # type: ignore[no-untyped-def]
    from cake.evaluation.ray_executor import RayExecutor

    return lambda evaluator: RayExecutor(evaluator, device="cpu", **options)  # type: ignore[arg-type]


def test_same_seed_same_candidates_and_verdicts_with_the_local_pool_and_with_ray(ray_local, tmp_path: Path) -> None:
    evaluator = ModelEvaluator(FakeToolchain(SEED).baseline_ms or 1.0)
    pool = _run(tmp_path / "pool", lambda e: LocalPoolExecutor(e, ("cpu", "cpu")), evaluator)
    made = []
    on_ray = _run(tmp_path / "ray", lambda e: made.append(_ray()(e)) or made[-1], evaluator)
    assert _sequence(pool) == _sequence(on_ray)
    assert on_ray.evaluation_count() == 1 + 2 * 2
    assert {c.evaluation.worker for c in on_ray.candidates() if c.evaluation} == {"cpu"}  # the device it ran on
    hosts = made[0].finished_by_worker  # where each ran: host:pid of a Ray worker
    assert sum(hosts.values()) == on_ray.evaluation_count() and all(":" in w for w in hosts)


def test_a_worker_killed_mid_evaluation_is_retried_and_the_run_completes(ray_local, tmp_path: Path) -> None:
    baseline = FakeToolchain(SEED).baseline_ms or 1.0
    reference = _run(tmp_path / "reference", _ray(), ModelEvaluator(baseline))
    victim = [c.id for c in reference.candidates() if c.turn == 1 and c.evaluation][0]
    marker = tmp_path / "victim.pid"

    def kill_when_running() -> None:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if marker.exists():
            os.kill(int(marker.read_text()), signal.SIGKILL)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    try:
        store = _run(tmp_path / "killed", _ray(), DiesOnce(ModelEvaluator(baseline), victim, str(marker)))
    finally:
        killer.join()
    retries = store.events("retry")
    assert len(retries) == 1 and retries[0][2].startswith(f"#{victim} attempt 1 lost: WorkerCrashedError")
    assert store.candidate(victim).status is CandidateStatus.PASSED
    assert _sequence(store) == _sequence(reference)


def test_a_hung_evaluation_is_cancelled_at_its_timeout_and_frees_its_slot(ray_local, tmp_path: Path) -> None:
    from cake.evaluation.ray_executor import RayExecutor

    baseline = 1.0
    for i in range(3):
        (tmp_path / f"{i}.cake").write_text(f"schedule {i}")
    jobs = [EvalJob(i, f"h{i}", tmp_path / f"{i}.cake", 0.5) for i in range(3)]
    executor = RayExecutor(Hangs(ModelEvaluator(baseline, delay_s=0.0), victim=0), device="cpu", slots=1,
                           timeout_s=2.0, grace_s=8.0)  # the grace covers a fresh worker starting
    started = time.monotonic()
    try:
        for job in jobs:
            executor.submit(job)
        done = []
        while executor.pending():
            done.extend(executor.collect())
    finally:
        executor.close()
    by_id = {c.job.candidate_id: c.evaluation for c in done}
    assert sorted(by_id) == [0, 1, 2]
    hung = by_id[0]
    assert hung.status is CandidateStatus.FAILED and hung.fitness is None and hung.error
    assert hung.error.startswith("TIMEOUT")
    assert by_id[1].status is by_id[2].status is CandidateStatus.PASSED  # the one slot was free again
    assert time.monotonic() - started < 60


def test_without_ray_the_executor_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from cake.evaluation.ray_executor import RayUnavailableError, require_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RayUnavailableError, match=r'pip install -e "\.\[ray\]"'):
        require_ray()


def test_evolve_with_the_ray_executor_but_no_ray_is_a_usage_error_before_any_run_is_written(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['ray'] = None; from cake.cli import main; "
            f"sys.exit(main(['evolve', '--device', 'cpu', '--executor', 'ray', '--out', {str(tmp_path / 'run')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert 'cake evolve: error: the Ray executor needs Ray: pip install -e ".[ray]"' in done.stderr
    assert not (tmp_path / "run").exists()
