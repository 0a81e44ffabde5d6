"""Run a candidate kernel's gates in an isolated worker subprocess.

The parent never runs kernel code. It starts `python -m cake.verifier.worker_main` in a new session
(its own process group), sends one gate at a time, and waits with a deadline:

- the gate answers                 -> its GateResult, as the gate computed it;
- the deadline passes              -> the whole process group is killed, the gate is TIMEOUT, and a
                                      fresh worker runs the remaining gates;
- the worker dies (signal, exit)   -> RUNTIME_ERROR with the exit status and the tail of its stderr,
                                      a fresh worker, and the battery goes on;
- a RUNTIME_ERROR on CUDA          -> the worker is replaced too: a CUDA error poisons the context.

Verdicts without TIMEOUT or RUNTIME_ERROR are cached on disk (see `verdict_cache`).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from cake.verifier.results import GateResult, GateStatus, Verdict
from cake.verifier.verdict_cache import VerdictCache, default_cache, verdict_key
from cake.verifier.worker_protocol import (
    KernelRef,
    MessageType,
    ReplayOutcome,
    decode,
    encode,
    resource_report_to_json,
)

from cake.process_groups import close_group, end_group, kill_group

if TYPE_CHECKING:
    from cake.verifier.gates.base import ResourceReport

# Importing torch (and triton) in a fresh worker takes seconds; a kernel module that needs more than
# this to import is treated as unloadable rather than as a slow gate.
LOAD_TIMEOUT_S = 120.0
STDERR_TAIL_LINES = 12


class KernelLoadError(Exception):
    """The worker could not load the kernel: a usage problem, not a verdict."""


@dataclass(frozen=True, slots=True)
class Answer:
    kind: MessageType
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TimedOut:
    after_s: float


@dataclass(frozen=True, slots=True)
class Died:
    """The worker exited without answering. `returncode` < 0 is the signal number (POSIX)."""

    returncode: int
    stderr_tail: str

    def describe(self) -> str:
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"worker killed by {name}"
        return f"worker exited with status {self.returncode}"


Outcome = Answer | TimedOut | Died


def worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cpu":
        # Triton reads this at import time; the worker has not imported anything yet.
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


class Worker:
    """One worker process with one loaded kernel. Not thread-safe; one request at a time.

    The process learns its kernel only at `load`, so a worker may be started before its kernel is known
    (`kernel_ref` None: a spare, started while the previous evaluation finishes) and given one by `bind`."""

    def __init__(self, kernel_ref: KernelRef | None, device: str):
        self.kernel_ref = kernel_ref
        self.device = device
        self._loaded = False
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "cake.verifier.worker_main", "--parent", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=worker_env(device),
            start_new_session=True,  # its own process group: a timeout kills the kernel's children too
        )
        self._buffer = b""

    @property
    def pid(self) -> int:
        return self._proc.pid

    def bind(self, kernel_ref: KernelRef) -> Worker:
        """This worker, to serve `kernel_ref`: a spare started before its kernel was known. Only before `load`."""
        if self._loaded:
            raise ValueError(f"worker {self.pid} has loaded {self.describe_kernel()} already; it cannot serve "
                             f"{kernel_ref.describe()}")
        self.kernel_ref = kernel_ref
        return self

    def alive(self) -> bool:
        """The process is still running (a spare that died while it waited is replaced, not loaded)."""
        return self._proc.poll() is None

    def describe_kernel(self) -> str:
        return "no kernel yet" if self.kernel_ref is None else self.kernel_ref.describe()

    def load(self, timeout_s: float = LOAD_TIMEOUT_S) -> None:
        if self.kernel_ref is None:
            raise ValueError("a spare worker loads a kernel only once it is bound to one (Worker.bind)")
        self._loaded = True
        outcome = self.request(encode(MessageType.LOAD, kernel=self.kernel_ref.to_json()), timeout_s)
        if isinstance(outcome, Answer) and outcome.kind is MessageType.LOADED:
            return
        self.kill()
        if isinstance(outcome, Answer):
            raise KernelLoadError(f"cannot load {self.kernel_ref.describe()}: {outcome.payload['message']}")
        if isinstance(outcome, TimedOut):
            raise KernelLoadError(f"loading {self.kernel_ref.describe()} took more than {timeout_s:.0f} s")
        raise KernelLoadError(
            f"loading {self.kernel_ref.describe()} failed ({outcome.describe()}):\n{outcome.stderr_tail}"
        )

    def request(self, message: bytes, timeout_s: float) -> Outcome:
        """Send one request and wait for one answer line, at most `timeout_s` seconds."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(message)
            self._proc.stdin.flush()
        except BrokenPipeError:
            return self._died()
        deadline = time.monotonic() + timeout_s
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                return TimedOut(timeout_s)
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)  # raw fd: a buffered reader would hide data from select
            if not chunk:
                return self._died()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        kind, payload = decode(line)
        return Answer(kind, payload)

    def _died(self) -> Died:
        returncode = self._proc.wait()
        kill_group(self._proc)  # the worker is gone; its children may not be
        return Died(returncode, self.stderr_tail())

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace")
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def kill(self) -> None:
        end_group(self._proc)

    def close(self) -> None:
        """Ask the worker to exit (end of input), then make sure its group is gone."""
        close_group(self._proc)
        self._stderr.close()

    def abandon(self) -> None:
        """End a worker that was never given work (a spare started ahead): killed at once, nothing to finish.
        Safe after `close`."""
        self.kill()
        self._stderr.close()


class SpareWorkers:
    """Verifier workers started before their kernels are known, one kept ready per device: `take` hands the ready one
    over, bound to its kernel, and starts the next, so a caller verifying one kernel after another (an evolve run's
    evaluator) pays a process start (Python and torch: seconds) only for its first. Thread-safe."""

    def __init__(self) -> None:
        self._ready: dict[str, Worker] = {}
        self._lock = threading.Lock()

    def take(self, kernel_ref: KernelRef, device: str) -> Worker:
        with self._lock:
            ready = self._ready.pop(device, None)
            self._ready[device] = Worker(None, device)
        if ready is None or not ready.alive():
            if ready is not None:
                ready.abandon()
            ready = Worker(None, device)
        return ready.bind(kernel_ref)

    def close(self) -> None:
        with self._lock:
            ready, self._ready = list(self._ready.values()), {}
        for worker in ready:
            worker.abandon()


@dataclass(frozen=True, slots=True)
class StandardOutcome:
    passed: bool
    reason: str


class WorkerSession:
    """Runs gates one at a time, replacing the worker after a timeout or a crash. `started`: a worker process already
    spawned for this kernel and device, not yet loaded, which the session takes over as its first worker."""

    def __init__(self, kernel_ref: KernelRef, device: str, timeout_s: float, started: Worker | None = None):
        if started is not None and (started.kernel_ref, started.device) != (kernel_ref, device):
            raise ValueError(f"a worker started for {started.describe_kernel()} on {started.device} cannot serve "
                             f"{kernel_ref.describe()} on {device}")
        self.kernel_ref = kernel_ref
        self.device = device
        self.timeout_s = timeout_s
        self._started = started
        self._worker: Worker | None = None
        self.restarts = 0

    def __enter__(self) -> WorkerSession:
        self._ensure_worker()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        if self._started is not None:  # never needed (a session that ran nothing)
            self._started.abandon()
            self._started = None

    def _ensure_worker(self) -> Worker:
        if self._worker is None:
            worker, self._started = self._started or Worker(self.kernel_ref, self.device), None
            worker.load()
            self._worker = worker
        return self._worker

    def _discard_worker(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
            self.restarts += 1

    def run_gate(self, gate_id: str, op: str, *, dtypes: Sequence[str], seed: int,
                 resource_report: ResourceReport | None = None) -> GateResult:
        worker = self._ensure_worker()
        message = encode(MessageType.GATE, gate_id=gate_id, op=op, device=self.device, dtypes=list(dtypes),
                         seed=seed, resource_report=resource_report_to_json(resource_report))
        outcome = worker.request(message, self.timeout_s)
        if isinstance(outcome, Answer):
            result = GateResult.from_json(outcome.payload["result"])
            if result.status is GateStatus.RUNTIME_ERROR and self.device != "cpu":
                self._discard_worker()  # a CUDA error leaves the context unusable for later gates
            return result
        self._discard_worker()
        if isinstance(outcome, TimedOut):
            return GateResult(gate_id, GateStatus.TIMEOUT,
                              f"no answer within {outcome.after_s:g} s; worker process group killed")
        tail = f"; stderr ends with:\n{outcome.stderr_tail}" if outcome.stderr_tail else ""
        return GateResult(gate_id, GateStatus.RUNTIME_ERROR, f"{outcome.describe()} while running this gate{tail}")

    def standard(self, op: str, seed: int) -> StandardOutcome:
        """The KernelBench-style check, in the worker: a hang or a crash fails it (and says so)."""
        worker = self._ensure_worker()
        outcome = worker.request(encode(MessageType.STANDARD, op=op, device=self.device, seed=seed), self.timeout_s)
        if isinstance(outcome, Answer):
            return StandardOutcome(bool(outcome.payload["passed"]), str(outcome.payload["reason"]))
        self._discard_worker()
        if isinstance(outcome, TimedOut):
            return StandardOutcome(False, f"timed out after {outcome.after_s:g} s")
        return StandardOutcome(False, f"{outcome.describe()}: {outcome.stderr_tail}")

    def replay(self, token: str) -> ReplayOutcome | TimedOut | Died:
        worker = self._ensure_worker()
        outcome = worker.request(encode(MessageType.REPLAY, token=token, device=self.device), self.timeout_s)
        if isinstance(outcome, Answer):
            return ReplayOutcome.from_json(outcome.payload["outcome"])
        self._discard_worker()
        assert not isinstance(outcome, Answer)
        return outcome


def _gate_ids(gates: Sequence[str] | None) -> tuple[str, ...]:
    """The requested gates in battery order (cheap gates first), as `run_battery` orders them."""
    from cake.verifier.gates import GATE_ORDER, get_gate

    if gates is None:
        return tuple(GATE_ORDER)
    for gate_id in gates:
        get_gate(gate_id)  # an unknown ID is a usage error, raised before any process starts
    return tuple(g for g in GATE_ORDER if g in set(gates))


def run_battery_in_session(session: WorkerSession, op: str, gate_ids: Sequence[str], *, dtypes: Sequence[str],
                           seed: int, all_gates: bool, resource_report: ResourceReport | None = None) -> Verdict:
    """Gates one at a time in `session`. Without `all_gates`, the gates after the first failure are listed
    as SKIP exactly as the in-process `run_battery` lists them, so both paths give the same verdict."""
    results: list[GateResult] = []
    stopped: str | None = None
    for gate_id in gate_ids:
        if stopped is not None:
            results.append(GateResult(gate_id, GateStatus.SKIP, f"not run: {stopped} failed (run all gates to see it)"))
            continue
        result = session.run_gate(gate_id, op, dtypes=dtypes, seed=seed, resource_report=resource_report)
        results.append(result)
        if result.status.is_failure and not all_gates:
            stopped = gate_id
    return Verdict.of(op, tuple(results))


@dataclass(frozen=True, slots=True)
class _Lookup:
    store: VerdictCache | None
    key: str

    def get(self) -> Verdict | None:
        return self.store.get(self.key) if self.store is not None else None

    def put(self, verdict: Verdict) -> None:
        if self.store is not None and cacheable(verdict):
            self.store.put(self.key, verdict)


def _lookup(op: str, kernel_ref: KernelRef, *, device: str, dtypes: Sequence[str], seed: int, all_gates: bool,
            gate_ids: Sequence[str], resource_report: ResourceReport | None, cache: VerdictCache | None,
            use_cache: bool) -> _Lookup:
    from cake.verifier.registry import get_contract

    get_contract(op)  # an unknown op is a usage error before any process starts
    store = (cache or default_cache()) if use_cache else None
    key = verdict_key(kernel_ref=kernel_ref, op=op, device=device, dtypes=dtypes, seed=seed, gates=gate_ids,
                      all_gates=all_gates, resource_report=resource_report_to_json(resource_report))
    return _Lookup(store, key)


def verify_in_worker(
    op: str,
    kernel_ref: KernelRef,
    *,
    device: str,
    dtypes: Sequence[str],
    seed: int,
    all_gates: bool,
    timeout_s: float,
    resource_report: ResourceReport | None = None,
    gates: Sequence[str] | None = None,
    cache: VerdictCache | None = None,
    use_cache: bool = True,
    spares: SpareWorkers | None = None,
) -> Verdict:
    """Run the contract battery for `op` on the kernel named by `kernel_ref`, isolated.

    Raises UnknownOpError (a KeyError) for an unknown op or gate, and KernelLoadError when the kernel
    cannot be loaded; every other outcome, crashes and hangs included, is a Verdict. `spares`: where a worker
    started ahead is taken from when the cache does not answer (else one is started here).
    """
    gate_ids = _gate_ids(gates)
    lookup = _lookup(op, kernel_ref, device=device, dtypes=dtypes, seed=seed, all_gates=all_gates, gate_ids=gate_ids,
                     resource_report=resource_report, cache=cache, use_cache=use_cache)
    cached = lookup.get()
    if cached is not None:
        return cached
    started = spares.take(kernel_ref, device) if spares is not None else None
    with WorkerSession(kernel_ref, device, timeout_s, started) as session:
        verdict = run_battery_in_session(session, op, gate_ids, dtypes=dtypes, seed=seed, all_gates=all_gates,
                                         resource_report=resource_report)
    lookup.put(verdict)
    return verdict


def verify_dtypes_in_worker(op: str, kernel_ref: KernelRef, *, device: str, dtypes: Sequence[str], seed: int,
                            all_gates: bool, timeout_s: float, gates: Sequence[str] | None = None,
                            cache: VerdictCache | None = None, use_cache: bool = True,
                            started: Worker | None = None) -> tuple[tuple[str, Verdict], ...]:
    """`verify_in_worker` at each dtype alone, in order, in one worker session (one process start and one load for
    all of them: the GPU evaluation used to start a second worker for the dtypes it does not time). Each dtype's
    verdict is cached under the key a single-dtype `verify_in_worker` uses, so either path finds it. Stops at the
    first dtype that fails: the dtypes after it are not run and are absent from the result. `started`: as in
    `verify_cells_in_worker`."""
    ordered = list(dict.fromkeys(dtypes))
    verdicts = verify_cells_in_worker(op, kernel_ref, [(seed, (dtype,)) for dtype in ordered], device=device,
                                      all_gates=all_gates, timeout_s=timeout_s, gates=gates, cache=cache,
                                      use_cache=use_cache, stop_at_failure=True, started=started)
    return tuple(zip(ordered, verdicts, strict=False))


def verify_cells_in_worker(op: str, kernel_ref: KernelRef, cells: Sequence[tuple[int, Sequence[str]]], *,
                           device: str, all_gates: bool, timeout_s: float,
                           resource_report: ResourceReport | None = None, gates: Sequence[str] | None = None,
                           cache: VerdictCache | None = None, use_cache: bool = True,
                           stop_at_failure: bool = False, started: Worker | None = None,
                           spares: SpareWorkers | None = None) -> list[Verdict]:
    """One battery per (seed, dtypes) cell, in order, each cached under the key a `verify_in_worker` of that seed
    and those dtypes uses; one worker session, started at the first cell the cache does not answer, serves the
    rest. With `stop_at_failure` the cells after the first failing one are not run and are absent from the result.
    `started`: a worker already spawned for this kernel (its start overlapped the caller's own setup); this call
    owns it: the session's first worker, or closed unused when the cache answers every cell. Without one, `spares`
    is where the session's first worker is taken from (else it is started here)."""
    gate_ids = _gate_ids(gates)
    out: list[Verdict] = []
    with ExitStack() as stack:
        if started is not None:
            stack.callback(started.abandon)  # a no-op once a session has taken it and closed it
        session: WorkerSession | None = None
        for seed, dtypes in cells:
            lookup = _lookup(op, kernel_ref, device=device, dtypes=dtypes, seed=seed, all_gates=all_gates,
                             gate_ids=gate_ids, resource_report=resource_report, cache=cache, use_cache=use_cache)
            verdict = lookup.get()
            if verdict is None:
                if session is None and started is None and spares is not None:
                    started = spares.take(kernel_ref, device)
                session = session or stack.enter_context(WorkerSession(kernel_ref, device, timeout_s, started))
                verdict = run_battery_in_session(session, op, gate_ids, dtypes=dtypes, seed=seed,
                                                 all_gates=all_gates, resource_report=resource_report)
                lookup.put(verdict)
            out.append(verdict)
            if stop_at_failure and not verdict.passed:
                break
    return out


def audit_in_worker(op: str, kernel_ref: KernelRef, *, device: str, dtypes: Sequence[str], seed: int,
                    all_gates: bool, timeout_s: float, cache: VerdictCache | None = None,
                    use_cache: bool = True) -> tuple[StandardOutcome, Verdict]:
    """The standard check and the contract battery for one kernel, in one worker (the verdict cached
    as `verify_in_worker` caches it)."""
    gate_ids = _gate_ids(None)
    lookup = _lookup(op, kernel_ref, device=device, dtypes=dtypes, seed=seed, all_gates=all_gates, gate_ids=gate_ids,
                     resource_report=None, cache=cache, use_cache=use_cache)
    with WorkerSession(kernel_ref, device, timeout_s) as session:
        standard = session.standard(op, seed)
        verdict = lookup.get() or run_battery_in_session(session, op, gate_ids, dtypes=dtypes, seed=seed,
                                                         all_gates=all_gates)
    lookup.put(verdict)
    return standard, verdict


def cacheable(verdict: Verdict) -> bool:
    """TIMEOUT and RUNTIME_ERROR depend on the machine and its load as much as on the kernel."""
    return all(g.status not in (GateStatus.TIMEOUT, GateStatus.RUNTIME_ERROR) for g in verdict.gates)


def replay_in_worker(token: str, kernel_ref: KernelRef, *, device: str,
                     timeout_s: float) -> ReplayOutcome | TimedOut | Died:
    """Replay one failure token in a worker: the replay outcome, or TimedOut / Died."""
    with WorkerSession(kernel_ref, device, timeout_s) as session:
        return session.replay(token)
