"""Executors that run on this host: `InProcessExecutor` (one job at a time, in the caller's thread: tests
and debugging) and `LocalPoolExecutor` (one slot per device: a GPU each, or N CPU workers).

Both only schedule: the evaluator isolates each evaluation in worker processes of its own, so the pool's
threads merely wait on them. A Ray executor implements the same `Executor` protocol (issue 19).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from cake.evaluation.protocol import Completed, EvalJob, Evaluator
from cake.runs.store import Evaluation


class InProcessExecutor:
    """Runs each job in `collect`, in submission order, on one device."""

    def __init__(self, evaluator: Evaluator, device: str = "cpu"):
        self.evaluator = evaluator
        self.device = device
        self._queue: deque[EvalJob] = deque()

    def capacity(self) -> Mapping[str, int]:
        return {self.device: 1}

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


class LocalPoolExecutor:
    """One slot per entry of `devices` (repeat "cpu" for N CPU workers); jobs start in submission order on
    the first free slot."""

    def __init__(self, evaluator: Evaluator, devices: Sequence[str]):
        if not devices:
            raise ValueError("a local pool needs at least one device slot")
        self.evaluator = evaluator
        self._free = list(devices)
        self._slots = Counter(devices)
        self._queue: deque[EvalJob] = deque()
        self._running: dict[Future[Evaluation], tuple[EvalJob, str]] = {}
        self._pool = ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="cake-eval")

    def capacity(self) -> Mapping[str, int]:
        return dict(self._slots)

    def submit(self, job: EvalJob) -> None:
        self._queue.append(job)
        self._start()

    def _start(self) -> None:
        while self._queue and self._free:
            job, device = self._queue.popleft(), self._free.pop(0)
            self._running[self._pool.submit(self.evaluator.evaluate, job, device)] = (job, device)

    def collect(self) -> list[Completed]:
        if not self._running:
            return []
        done, _ = wait(self._running, return_when=FIRST_COMPLETED)
        finished = []
        for future in sorted(done, key=lambda f: self._running[f][0].candidate_id):
            job, device = self._running.pop(future)
            self._free.append(device)
            finished.append(Completed(job, future.result(), device))
        self._start()
        return finished

    def pending(self) -> int:
        return len(self._queue) + len(self._running)

    def close(self) -> None:
        self._queue.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
