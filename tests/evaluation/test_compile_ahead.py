"""Compiling ahead through the local pool: the loop's candidates, verdicts and order are the same with and without
it; each job's compiles finish before its evaluation starts (or are dropped when they had not started); a problem
compiling one candidate ahead is reported for that candidate only; closing the pool kills compile workers."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.offline import OfflineAgent
from cake.lowering.ahead import AheadEntry, AheadReport, AheadStatus
from fake_toolchain import FakeToolchain
from ray_doubles import ModelEvaluator

from cake.evaluation.ahead import AheadOutcome, AheadProcesses, compile_ahead_in_worker
from cake.evaluation.executors import LocalPoolExecutor
from cake.evaluation.protocol import AheadCompiler, EvalJob
from cake.runs.store import Evaluation, RunStore

SEED = Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / "assign_plain.cake"
SETTINGS = LoopSettings(turns=3, proposals_per_turn=8, evals_per_turn=3, seed=5)


class AheadDouble:
    """ModelEvaluator's verdicts, plus compiles ahead that take a little while and are recorded: which jobs were
    compiled, and whether each evaluation started after its own compiles ended."""

    def __init__(self, inner: ModelEvaluator, delay_s: float = 0.02):
        self.inner = inner
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.compiled: dict[int, float] = {}  # candidate id -> when its compiles ended
        self.started: dict[int, float] = {}  # candidate id -> when its evaluation started
        self.failed: int | None = None  # the second candidate compiled: its compiles fail (its evaluation must not)

    def compile_ahead(self, job: EvalJob, jobs: int, processes: AheadProcesses | None = None) -> AheadOutcome | None:
        time.sleep(self.delay_s)
        with self.lock:
            self.compiled[job.candidate_id] = time.monotonic()
            if len(self.compiled) == 2:
                self.failed = job.candidate_id
        if job.candidate_id == self.failed:
            return AheadOutcome(AheadReport((AheadEntry("T=bf16 D=128 sm_90a", AheadStatus.FAILED, 0.1,
                                                        "C0900 ptxas rejected the generated code"),)), 0.1)
        return AheadOutcome(AheadReport((AheadEntry("T=bf16 D=128 sm_90a", AheadStatus.BUILT, 0.1),)), 0.1)

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        with self.lock:
            self.started[job.candidate_id] = time.monotonic()
        return self.inner.evaluate(job, device)


def _run(root: Path, executor: LocalPoolExecutor) -> RunStore:
    store = RunStore.create(root, {"loop": SETTINGS.to_json()})
    try:
        EvolutionLoop(store, OfflineAgent(), FakeToolchain(SEED), SETTINGS, [SEED], executor=executor).run()
    finally:
        executor.close()
    return store


def _sequence(store: RunStore) -> list[tuple[object, ...]]:
    return [(c.id, c.turn, c.ir_hash, c.status.value,
             (c.evaluation.verdict, c.evaluation.fitness, c.evaluation.error) if c.evaluation else None)
            for c in store.candidates()]


def test_compiling_ahead_changes_no_candidate_verdict_or_order(tmp_path: Path) -> None:
    model = ModelEvaluator(FakeToolchain(SEED).baseline_ms or 1.0)
    plain = _run(tmp_path / "plain", LocalPoolExecutor(model, ("cuda:0",)))
    double = AheadDouble(model)
    assert isinstance(double, AheadCompiler)
    ahead = _run(tmp_path / "ahead", LocalPoolExecutor(double, ("cuda:0",), compile_workers=16))
    assert _sequence(ahead) == _sequence(plain) and ahead.evaluation_count() == 1 + 2 * 3
    # an evaluation whose compiles had started waited for them; the others' compiles were dropped, never run late
    assert len(double.compiled) >= 3 and set(double.compiled) <= set(double.started)
    assert all(double.started[i] >= double.compiled[i] for i in double.compiled)
    events = {int(d.split('"candidate_id": ')[1].split(",")[0]): d for _, _, d in ahead.events("ahead")}
    assert set(events) == set(double.compiled)
    assert double.failed is not None and '"failed"' in events[double.failed]
    assert all('"failed"' not in d for i, d in events.items() if i != double.failed)
    assert not plain.events("ahead")


def test_compiles_not_started_when_a_device_frees_are_dropped_and_the_job_runs_at_once(tmp_path: Path) -> None:
    double = AheadDouble(ModelEvaluator(1.0))
    release = threading.Event()
    compile_ahead = double.compile_ahead

    def held(job, jobs, processes=None):  # type: ignore[no-untyped-def]
        if job.candidate_id == 2:  # holds the only compile slot until released
            release.wait(30)
        return compile_ahead(job, jobs, processes)

    double.compile_ahead = held  # type: ignore[method-assign]
    pool = LocalPoolExecutor(double, ("cuda:0",), compile_workers=8)  # one candidate compiled at a time
    one, two = EvalJob(1, "h1", SEED, 1.0), EvalJob(2, "h2", SEED, 1.0)
    try:
        pool.prepare([two, one])  # job 2's compiles take the slot; job 1's wait behind them
        pool.submit(one)
        first = pool.collect()
        release.set()
        pool.submit(two)
        second = pool.collect()
    finally:
        pool.close()
    assert [c.job.candidate_id for c in first + second] == [1, 2]
    assert first[0].ahead is None and 1 not in double.compiled  # not started when the device freed: dropped
    assert second[0].ahead is not None and double.started[2] >= double.compiled[2]  # started: waited for
    assert all(c.evaluation.status.value == "passed" for c in first + second)


def test_closing_the_pool_kills_running_compile_workers() -> None:
    processes = AheadProcesses()
    proc = processes.start([sys.executable, "-c", "import time; time.sleep(60)"], {})
    assert proc is not None
    started = time.monotonic()
    processes.kill_all()
    proc.communicate(timeout=10)
    assert proc.returncode != 0 and time.monotonic() - started < 10
    assert processes.start([sys.executable, "-c", "pass"], {}) is None  # nothing new starts once closed


def test_a_schedule_that_does_not_load_is_a_problem_of_its_outcome(tmp_path: Path) -> None:
    from cake.evaluation.ahead import AheadRequest
    from cake.evaluation.evaluator import KernelSpec

    broken = tmp_path / "broken.cake"
    broken.write_text("schedule broken implements kmeans_assign\ntarget sm_90a\nthis is not a schedule\n")
    request = AheadRequest("kmeans_assign", KernelSpec(broken, "cuda", "sm_90a").ref(), ("bfloat16",), (0,), (9, 0), 1)
    outcome = compile_ahead_in_worker(request, timeout_s=120)
    assert outcome.report is None and outcome.problem is not None and "broken.cake" in outcome.problem


def test_a_hung_compile_worker_times_out_into_an_outcome(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from cake.evaluation import ahead

    real = subprocess.Popen

    def hang(command, **kwargs):  # type: ignore[no-untyped-def]
        return real([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)

    monkeypatch.setattr(ahead.subprocess, "Popen", hang)
    request = ahead.AheadRequest("kmeans_assign", _ref(), ("bfloat16",), (0,), (9, 0), 1)
    started = time.monotonic()
    outcome = compile_ahead_in_worker(request, timeout_s=1.0)
    assert outcome.report is None and outcome.problem == "compile worker timed out after 1 s"
    assert time.monotonic() - started < 30


def _ref():  # type: ignore[no-untyped-def]
    from cake.evaluation.evaluator import KernelSpec

    return KernelSpec(SEED, "cuda", "sm_90a").ref()


def test_compile_workers_default_to_the_cpus_less_two_per_gpu_on_cuda_backend_gpu_runs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from cake.cli.common import UsageError
    from cake.cli.evolve import compile_workers_for

    monkeypatch.setattr("os.cpu_count", lambda: 16)
    gpu_cuda, gpu_triton = {"device": "cuda", "backend": "cuda"}, {"device": "cuda", "backend": "triton"}
    assert compile_workers_for(None, gpu_cuda, 1) == 14 and compile_workers_for(None, gpu_cuda, 8) == 0
    assert compile_workers_for(None, gpu_triton, 1) == 0 and compile_workers_for(None, {"device": "cpu",
                                                                                        "backend": "triton"}, 2) == 0
    assert compile_workers_for(3, gpu_triton, 1) == 3
    with pytest.raises(UsageError, match="--compile-workers must be >= 0"):
        compile_workers_for(-1, gpu_cuda, 1)
