"""Executors that run on this host: `InProcessExecutor` (one job at a time, in the caller's thread: tests
and debugging) and `LocalPoolExecutor` (one slot per device: a GPU each, or N CPU workers).

Both only schedule: the evaluator isolates each evaluation in worker processes of its own, so the pool's
threads merely wait on them. `cake.evaluation.ray_executor.RayExecutor` implements the same protocol on Ray;
`make_executor` picks one by name.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cake.evaluation.protocol import Completed, EvalJob, Evaluator
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
                  timeout_s: float | None = None) -> LocalPoolExecutor | RayExecutor:
    """A local pool over `devices`, or (inside `executor_runtime("ray", ...)`) a Ray executor with one slot per
    GPU of the cluster, or per CPU of it."""
    if kind == "local":
        return LocalPoolExecutor(evaluator, devices)
    if kind != "ray":
        raise ValueError(f"unknown executor {kind!r} (local or ray)")
    from cake.evaluation.ray_executor import RayExecutor

    device = "cpu" if all(d == "cpu" for d in devices) else "cuda"
    return RayExecutor(evaluator, device=device, timeout_s=timeout_s)
