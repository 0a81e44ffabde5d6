"""Executors that run on this host: `InProcessExecutor` (one job at a time, in the caller's thread: tests
and debugging) and `LocalPoolExecutor` (one slot per device: a GPU each, or N CPU workers).

Both only schedule: the evaluator isolates each evaluation in worker processes of its own, so the pool's
threads merely wait on them. A local pool given `compile_workers` also compiles ahead: `prepare(jobs)` starts
each job's compiles on the CPU (the evaluator's `compile_ahead`, `cake.evaluation.ahead`) while earlier jobs
hold the devices, and a job starts on its device once its compiles are done — or at once, compiling for
itself as before, when they had not started yet. `cake.evaluation.ray_executor.RayExecutor` implements the same protocol on Ray;
`make_executor` picks one by name.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cake.evaluation.ahead import NVCC_JOBS_PER_CANDIDATE, AheadOutcome, AheadProcesses
from cake.evaluation.protocol import AheadCompiler, Completed, EvalJob, Evaluator, ProcessHolder
from cake.runs.store import Evaluation

if TYPE_CHECKING:
    from cake.evaluation.ray_executor import RayExecutor


class InProcessExecutor:
    """Runs each job in `collect`, in submission order, on one device."""

    def __init__(self, evaluator: Evaluator, device: str = "cpu"):
        self.evaluator = evaluator
        self.device = device
        self._queue: deque[EvalJob] = deque()

    def capacity(self) -> Mapping[str, int]:
        return {self.device: 1}

    def prepare(self, jobs: Sequence[EvalJob]) -> None:
        """Nothing ahead: one job at a time, in the caller's thread."""

    def submit(self, job: EvalJob) -> None:
        self._queue.append(job)

    def collect(self) -> list[Completed]:
        if not self._queue:
            return []
        job = self._queue.popleft()
        return [Completed(job, self.evaluator.evaluate(job, self.device), self.device)]

    def pending(self) -> int:
        return len(self._queue)

    def close(self) -> None:
        self._queue.clear()
        if isinstance(self.evaluator, ProcessHolder):
            self.evaluator.close()


class LocalPoolExecutor:
    """One slot per entry of `devices` (repeat "cpu" for N CPU workers); jobs start in submission order on
    the first free slot. With `compile_workers` > 0 and an evaluator that compiles ahead (`AheadCompiler`),
    `prepare` compiles jobs ahead, `compile_workers` compiles at a time in all (NVCC_JOBS_PER_CANDIDATE a job)."""

    def __init__(self, evaluator: Evaluator, devices: Sequence[str], *, compile_workers: int = 0):
        if not devices:
            raise ValueError("a local pool needs at least one device slot")
        if compile_workers < 0:
            raise ValueError(f"compile_workers must be >= 0 (0: no compiles ahead), got {compile_workers}")
        self.evaluator = evaluator
        self._free = list(devices)
        self._slots = Counter(devices)
        self._queue: deque[EvalJob] = deque()
        self._running: dict[Future[tuple[Evaluation, AheadOutcome | None]], tuple[EvalJob, str]] = {}
        self._pool = ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="cake-eval")
        self._compiles_ahead = compile_workers > 0 and isinstance(evaluator, AheadCompiler)
        ahead_slots = max(1, compile_workers // NVCC_JOBS_PER_CANDIDATE)
        self._ahead_jobs = max(1, compile_workers // ahead_slots)
        self._ahead_pool = ThreadPoolExecutor(max_workers=ahead_slots, thread_name_prefix="cake-ahead")
        self._ahead: dict[int, Future[AheadOutcome | None]] = {}  # candidate id -> its compiles ahead
        self._processes = AheadProcesses()

    def capacity(self) -> Mapping[str, int]:
        return dict(self._slots)

    def prepare(self, jobs: Sequence[EvalJob]) -> None:
        if not self._compiles_ahead:
            return
        assert isinstance(self.evaluator, AheadCompiler)
        for job in jobs:  # in queue order: the ahead pool takes them first come, first served
            if job.candidate_id not in self._ahead:
                self._ahead[job.candidate_id] = self._ahead_pool.submit(
                    self.evaluator.compile_ahead, job, self._ahead_jobs, self._processes)

    def submit(self, job: EvalJob) -> None:
        self._queue.append(job)
        self._start()

    def _start(self) -> None:
        while self._queue and self._free:
            job, device = self._queue.popleft(), self._free.pop(0)
            ahead = self._ahead.pop(job.candidate_id, None)
            self._running[self._pool.submit(self._evaluate, job, device, ahead)] = (job, device)

    def _evaluate(self, job: EvalJob, device: str, ahead: Future[AheadOutcome | None] | None
                  ) -> tuple[Evaluation, AheadOutcome | None]:
        # Compiles not started yet are dropped (the evaluation compiles for itself, as without them); started
        # ones are waited for, so the evaluation finds their cache entries rather than compiling them again.
        outcome = None if ahead is None or ahead.cancel() else ahead.result()
        return self.evaluator.evaluate(job, device), outcome

    def collect(self) -> list[Completed]:
        if not self._running:
            return []
        done, _ = wait(self._running, return_when=FIRST_COMPLETED)
        finished = []
        for future in sorted(done, key=lambda f: self._running[f][0].candidate_id):
            job, device = self._running.pop(future)
            self._free.append(device)
            evaluation, ahead = future.result()
            finished.append(Completed(job, evaluation, device, ahead=ahead))
        self._start()
        return finished

    def pending(self) -> int:
        return len(self._queue) + len(self._running)

    def close(self) -> None:
        self._queue.clear()
        for future in self._ahead.values():
            future.cancel()
        self._ahead.clear()
        self._processes.kill_all()  # compiles nobody will use: killed, not waited for
        self._ahead_pool.shutdown(wait=True, cancel_futures=True)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(self.evaluator, ProcessHolder):  # after the pool: no evaluation is using them any more
            self.evaluator.close()


@contextmanager
def executor_runtime(kind: str, *, devices: Sequence[str], ray_address: str | None = None) -> Iterator[None]:
    """What executors of `kind` need for as long as the block runs: nothing for `local`; for `ray`, Ray joined
    at `ray_address` or started here with one CPU per CPU slot in `devices` (a GPU host: its CPUs and GPUs)."""
    if kind == "local":
        yield
        return
    from cake.evaluation.ray_executor import ray_session

    cpus = sum(d == "cpu" for d in devices) or None
    with ray_session(ray_address, num_cpus=cpus):
        yield


def make_executor(kind: str, evaluator: Evaluator, devices: Sequence[str], *,
                  timeout_s: float | None = None, compile_workers: int = 0) -> LocalPoolExecutor | RayExecutor:
    """A local pool over `devices` (compiling ahead on `compile_workers` CPUs), or (inside
    `executor_runtime("ray", ...)`) a Ray executor with one slot per GPU of the cluster, or per CPU of it."""
    if kind == "local":
        return LocalPoolExecutor(evaluator, devices, compile_workers=compile_workers)
    if kind != "ray":
        raise ValueError(f"unknown executor {kind!r} (local or ray)")
    from cake.evaluation.ray_executor import RayExecutor

    device = "cpu" if all(d == "cpu" for d in devices) else "cuda"
    return RayExecutor(evaluator, device=device, timeout_s=timeout_s)
