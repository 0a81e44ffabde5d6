"""`RayExecutor`: evaluations as Ray tasks, on one host or a cluster (`pip install -e ".[ray]"`).

Each job is one Ray task asking for one GPU (`num_gpus=1`; Ray sets CUDA_VISIBLE_DEVICES, so the task
evaluates on its "cuda:0") or one CPU, and runs the same isolated evaluator as the local pool. The candidate's
IR text travels with the task (a worker on another host cannot read the driver's run directory); the task
writes it to a content-addressed file on its own host and evaluates that. Only the driver writes the store.
`Completed.device` is the GPU as the task's host numbers it (`ray.get_gpu_ids()`): the loop confirms and
re-times a new best there, in the driver — right on one host; on a multi-host cluster that step still needs
the GPU on the driver's host (to be routed through the executor).

Failures of the machinery, not of the candidate:

* a worker process or node that dies mid-evaluation: the job is submitted again, at most `max_retries`
  times; every retry is reported in `Completed.retries` (the loop records it as a store event). Past the
  bound the candidate is an ERROR saying so — never a low score.
* an evaluation that outlives `timeout_s` (counted from its submission; at most one job per slot is
  submitted, so that is when it starts) plus `grace_s`: the evaluator's own timeouts should have fired
  first; the task is cancelled with `ray.cancel(force=True)` (its worker process is killed), its slot is
  free at once and the candidate is FAILED with a timeout error.

Ray is imported lazily: CAKE works without it, and `require_ray` says how to install it.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from cake.evaluation.protocol import Completed, EvalJob, Evaluator
from cake.runs.store import CandidateStatus, Evaluation

DEFAULT_MAX_RETRIES = 2
DEFAULT_GRACE_S = 30.0
POLL_S = 0.5  # how often collect() looks at deadlines while it waits


class RayUnavailableError(RuntimeError):
    """`--executor ray` without Ray installed."""


def require_ray() -> ModuleType:
    try:
        import ray
    except ImportError as error:
        raise RayUnavailableError('the Ray executor needs Ray: pip install -e ".[ray]" '
                                  f"(or pip install ray) — {error}") from None
    return ray


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None,
                num_gpus: int | None = None) -> Iterator[ModuleType]:
    """Ray for the duration of the block: join the cluster at `address` (started the usual way, `ray start
    --head`), or start a local one with `num_cpus` CPUs (and `num_gpus`, default: what Ray detects). An
    already initialized Ray is used as it is and left running."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    if address is not None:
        ray.init(address=address, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False, logging_level="WARNING",
                 log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _retryable(ray: ModuleType) -> tuple[type[BaseException], ...]:
    """Ray's errors for a task whose worker, node or result went away (not an exception of the evaluator)."""
    e = ray.exceptions
    return (e.WorkerCrashedError, e.NodeDiedError, e.LocalRayletDiedError, e.ObjectLostError, e.OwnerDiedError,
            e.OutOfMemoryError, e.TaskCancelledError)


def _evaluate_on_worker(evaluator: Evaluator, job: EvalJob, text: str, device: str) -> tuple[Evaluation, str, str]:
    """Runs inside a Ray worker: the candidate's text to a content-addressed file here, then the evaluator."""
    root = Path(tempfile.gettempdir()) / "cake-ray-candidates"
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{job.ir_hash}.cake"
    if not path.is_file():
        partial = root / f".{job.ir_hash}.{os.getpid()}.tmp"
        partial.write_text(text)
        partial.replace(path)  # atomic: a concurrent task on this host reads a whole file or none
    evaluation = evaluator.evaluate(replace(job, path=path), device)
    # Beside it: where the worker was, and the device as its host numbers it (Ray pins the task's GPU as its
    # cuda:0; the loop confirms and re-times a new best on the device it ran on).
    physical = device
    if device.startswith("cuda"):
        import ray

        physical = f"cuda:{int(ray.get_gpu_ids()[0])}"
    return evaluation, f"{socket.gethostname()}:{os.getpid()}", physical


@dataclass
class _Running:
    job: EvalJob
    text: str
    deadline: float | None
    retries: list[str] = field(default_factory=list)


class RayExecutor:
    """One slot per GPU in the Ray cluster (`device="cuda"`) or per CPU (`device="cpu"`; `slots` caps it).
    Needs a running Ray (`ray_session`)."""

    def __init__(self, evaluator: Evaluator, *, device: str = "cpu", slots: int | None = None,
                 max_retries: int = DEFAULT_MAX_RETRIES, timeout_s: float | None = None,
                 grace_s: float = DEFAULT_GRACE_S):
        ray = require_ray()
        if not ray.is_initialized():
            raise RuntimeError("RayExecutor needs a running Ray: use cake.evaluation.ray_executor.ray_session")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, not {device!r}")
        self._ray = ray
        self.device = device
        resources = ray.cluster_resources()
        available = int(resources.get("GPU" if device == "cuda" else "CPU", 0))
        if available < 1:
            raise RuntimeError(f"the Ray cluster has no {'GPU' if device == 'cuda' else 'CPU'} to evaluate on")
        self.slots = min(available, slots) if slots else available
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self._task_device = "cuda:0" if device == "cuda" else "cpu"  # Ray pins the task's GPU as device 0
        resource = {"num_gpus": 1, "num_cpus": 0} if device == "cuda" else {"num_cpus": 1}
        # Retries are ours (max_retries=0 for Ray): each one is seen, bounded and recorded.
        self._remote = ray.remote(_evaluate_on_worker).options(max_retries=0, **resource)
        self._evaluator_ref = ray.put(evaluator)
        self._queue: deque[EvalJob] = deque()
        self._running: dict[Any, _Running] = {}  # ObjectRef -> its job
        self._done: list[Completed] = []
        self.retried = 0  # retries so far (for progress views)
        self.finished_by_worker: Counter[str] = Counter()  # host:pid of the Ray worker -> evaluations

    def capacity(self) -> Mapping[str, int]:
        return {self.device: self.slots}

    def in_flight(self) -> int:
        return len(self._running)

    def prepare(self, jobs: Sequence[EvalJob]) -> None:
        """Nothing ahead: a job's compiles happen on the node that runs it, whose cache this host cannot fill."""

    def submit(self, job: EvalJob) -> None:
        self._queue.append(job)
        self._start()

    def _launch(self, job: EvalJob, text: str, retries: list[str]) -> None:
        ref = self._remote.remote(self._evaluator_ref, job, text, self._task_device)
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s + self.grace_s
        self._running[ref] = _Running(job, text, deadline, retries)

    def _start(self) -> None:
        while self._queue and len(self._running) < self.slots:
            job = self._queue.popleft()
            self._launch(job, job.path.read_text(), [])

    def collect(self) -> list[Completed]:
        while not self._done and self._running:
            ready, _ = self._ray.wait(list(self._running), num_returns=1, timeout=POLL_S)
            if ready:  # take every other finished one too
                ready, _ = self._ray.wait(list(self._running), num_returns=len(self._running), timeout=0)
            for ref in ready:
                self._finish(ref)
            self._cancel_overdue()
            self._start()
        finished, self._done = sorted(self._done, key=lambda c: c.job.candidate_id), []
        return finished

    def _finish(self, ref: Any) -> None:
        running = self._running.pop(ref)
        try:
            evaluation, worker, device = self._ray.get(ref)
            self.finished_by_worker[worker] += 1
        except _retryable(self._ray) as error:
            reason = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200] if str(error) else ''}"
            running.retries.append(reason)
            self.retried += 1
            if len(running.retries) <= self.max_retries:
                self._launch(running.job, running.text, running.retries)
                return
            evaluation = Evaluation(CandidateStatus.ERROR, None, (), {}, None, None, None, None,
                                    f"ray: the worker died on each of {len(running.retries)} attempts; last: "
                                    f"{reason}", f"ray/{self.device}", 0.0)
            device = self._task_device
        self._done.append(Completed(running.job, evaluation, device, tuple(running.retries)))

    def _cancel_overdue(self) -> None:
        now = time.monotonic()
        for ref, running in list(self._running.items()):
            if running.deadline is None or now < running.deadline:
                continue
            self._ray.cancel(ref, force=True)  # kills the worker process; its slot is ours again at once
            del self._running[ref]
            assert self.timeout_s is not None
            waited = self.timeout_s + self.grace_s
            self._done.append(Completed(running.job, Evaluation(
                CandidateStatus.FAILED, None, (), {}, None, None, None, None,
                f"TIMEOUT: the evaluation ran past {waited:g} s on Ray and was cancelled", f"ray/{self.device}",
                waited), self._task_device, tuple(running.retries)))

    def pending(self) -> int:
        return len(self._queue) + len(self._running) + len(self._done)

    def close(self) -> None:
        self._queue.clear()
        for ref in list(self._running):
            self._ray.cancel(ref, force=True)
        self._running.clear()
