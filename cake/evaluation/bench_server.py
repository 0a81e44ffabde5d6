"""A bench process that serves many evaluations: `python -m cake.evaluation.bench_server --reply-fd N`.

The one-shot bench worker (`cake.evaluation.bench_worker`) pays a Python, torch and CUDA start for every evaluation,
and its verifier worker pays another: about 5 s each of an evaluation's ~22 s on the H200 (session 21's stages).
A bench server pays its own once, and starts the next evaluation's verifier worker as soon as it has answered, so
that start is off the next evaluation's path too. Each request is the one-shot worker's (a `BenchRequest` file in,
the same result file out), served by the same `BenchService`.

Isolation is kept where it matters:
- a kernel's gates still run in a verifier worker of its own (a crash there is a gate's verdict, as before);
- a request that ends in anything but a clean timing (a setup error, an internal error, a candidate measurement
  that failed) ends the server after its answer, so a kernel that may have poisoned the CUDA context never shares it
  with the next candidate; the next request starts a fresh server;
- on a timeout the client kills the server's whole process group, as it kills a one-shot worker's.

Protocol: the client writes one line per request to the server's stdin, `{"request": PATH, "result": PATH}`, and
reads one line back on a pipe of its own (`--reply-fd`; the server's stdout and stderr go to a log the client reads
tails of): `{"status": S, "reusable": R}`, S being the exit status the one-shot worker would have returned. End of
stdin (the client closed it, or died) ends the server.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cake.process_groups import close_group, end_group, exit_with_parent, kill_group

DEFAULT_SERVICE = "cake.evaluation.bench_worker:BenchService"
LOG_TAIL_LINES = 15


class Service(Protocol):
    def prepare(self) -> None: ...

    def serve(self, request_file: Path, result_file: Path) -> Served: ...

    def start_spare(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Served:
    """The server's answer to one request (the one-shot worker's exit status, and whether it serves another)."""

    status: int
    reusable: bool


@dataclass(frozen=True, slots=True)
class Ended:
    """The server gave no answer: it died (`returncode`) or ran past the request's time limit (`timed_out`)."""

    returncode: int | None
    timed_out: bool


def serve(service: Service, requests: Callable[[], str], reply: Callable[[str], object], *, once: bool = False) -> None:
    """Answer requests until end of input or a request that leaves the process unfit for another; `once`: after the
    first request (a fresh process's, which starts nothing for a next one)."""
    while line := requests():
        job = json.loads(line)
        served = service.serve(Path(job["request"]), Path(job["result"]))
        reply(json.dumps({"status": served.status, "reusable": served.reusable}) + "\n")
        if once or not served.reusable:
            return
        service.start_spare()


def _service(spec: str) -> Service:
    module, _, name = spec.partition(":")
    factory = getattr(importlib.import_module(module), name)
    return factory()  # type: ignore[no-any-return]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m cake.evaluation.bench_server", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reply-fd", type=int, required=True, help="the pipe answers are written to")
    ap.add_argument("--parent", type=int, required=True, help="the client's pid: the server ends when it is gone")
    ap.add_argument("--service", default=DEFAULT_SERVICE, help="module:factory of what serves each request")
    ap.add_argument("--once", action="store_true", help="serve one request, then end (a process started ahead)")
    args = ap.parse_args(argv)
    exit_with_parent(args.parent)  # a run killed at its time limit takes its bench server with it
    service = _service(args.service)
    if args.once:  # started ahead of its request: what the request would import is paid while it waits
        service.prepare()
    with os.fdopen(args.reply_fd, "w", buffering=1) as replies:
        try:
            serve(service, sys.stdin.readline, replies.write, once=args.once)
        finally:
            service.close()
    return 0


# ------------------------------------------------------------------------------------------------ client


class BenchServer:
    """One server process and the pipes to it; used by one thread at a time (the evaluator's slot for its device)."""

    def __init__(self, env: Mapping[str, str], service: str = DEFAULT_SERVICE, *, once: bool = False):
        fd, log = tempfile.mkstemp(prefix="cake-bench-server-", suffix=".log")
        os.close(fd)
        self.log = Path(log)
        read_end, write_end = os.pipe()
        with self.log.open("ab") as out:
            # Its own session: on a timeout the whole group goes (the verifier's workers run in sessions of their
            # own and are killed by the bench's per-gate timeouts, or when their stdin closes with the server).
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cake.evaluation.bench_server", "--reply-fd", str(write_end),
                 "--parent", str(os.getpid()), "--service", service, *(["--once"] if once else [])],
                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, env=dict(env), pass_fds=(write_end,),
                start_new_session=True)
        os.close(write_end)
        self._replies = read_end
        self._buffer = b""

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc.poll() is None

    def log_size(self) -> int:
        return self.log.stat().st_size

    def log_since(self, offset: int, lines: int = LOG_TAIL_LINES) -> str:
        """The last `lines` lines the server printed after `offset` (its log's size when a request was sent)."""
        with self.log.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    def request(self, request_file: Path, result_file: Path, timeout_s: float) -> Served | Ended:
        """Send one request and wait for its answer, at most `timeout_s` seconds (then the server is killed)."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps({"request": str(request_file), "result": str(result_file)}) + "\n")
                                   .encode())
            self._proc.stdin.flush()
        except BrokenPipeError:
            return self._ended(timed_out=False)
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                return Ended(self._proc.returncode, timed_out=True)
            ready, _, _ = select.select([self._replies], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._replies, 1 << 12)
            if not chunk:
                return self._ended(timed_out=False)
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer = json.loads(line)
        return Served(int(answer["status"]), bool(answer["reusable"]))

    def _ended(self, *, timed_out: bool) -> Ended:
        returncode = self._proc.wait()
        kill_group(self._proc)  # the server is gone; its children (a verifier worker) may not be
        return Ended(returncode, timed_out)

    def kill(self) -> None:
        end_group(self._proc)

    def close(self) -> None:
        """End of input: the server finishes (closing its spare verifier worker), then its group is gone for sure."""
        close_group(self._proc)
        os.close(self._replies)
        self.log.unlink(missing_ok=True)


ServerKey = tuple[str, tuple[tuple[str, str], ...]]  # a device and the environment its servers start with


def server_key(device: str, env: Mapping[str, str]) -> ServerKey:
    return device, tuple(sorted(env.items()))


class BenchServers:
    """This process's bench servers, one per (device, environment), started on first use and replaced after any
    request that ended one. Each device's server is used by one evaluation at a time (its executor slot)."""

    def __init__(self, service: str = DEFAULT_SERVICE):
        self.service = service
        self._servers: dict[ServerKey, BenchServer] = {}
        self._lock = threading.Lock()

    def server(self, device: str, env: Mapping[str, str]) -> BenchServer:
        key = server_key(device, env)
        with self._lock:
            server = self._servers.get(key)
            if server is None or not server.alive():
                if server is not None:
                    server.close()
                server = self._servers[key] = BenchServer(env, self.service)
            return server

    def request(self, device: str, env: Mapping[str, str], request_file: Path, result_file: Path,
                timeout_s: float) -> tuple[Served | Ended, str]:
        """The answer to one request on `device`'s server, and what the server printed while serving it."""
        server = self.server(device, env)
        offset = server.log_size()
        answer = server.request(request_file, result_file, timeout_s)
        tail = server.log_since(offset)
        if isinstance(answer, Ended) or not answer.reusable:
            self._retire(server)
        return answer, tail

    def _retire(self, server: BenchServer) -> None:
        with self._lock:
            for key, held in list(self._servers.items()):
                if held is server:
                    del self._servers[key]
        server.close()

    def close_all(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()


class FreshBenchServers:
    """Bench servers that each serve ONE request, started one request ahead per (device, environment): what a
    re-timing wants, a figure from a process that has run no other kernel, without that process's Python and torch
    start on its path (about 5 s of a ~10 s re-timing on the H200, one to nine re-timings a seed). `prepare` starts
    the next one; `request` takes the ready one (or starts one), ends it after its answer and prepares the next."""

    def __init__(self, service: str = DEFAULT_SERVICE):
        self.service = service
        self._ready: dict[ServerKey, BenchServer] = {}
        self._lock = threading.Lock()

    def prepare(self, device: str, env: Mapping[str, str]) -> None:
        """Start the next request's process for `device` now, unless one is ready."""
        key = server_key(device, env)
        with self._lock:
            ready = self._ready.get(key)
            if ready is not None and ready.alive():
                return
            self._ready[key] = BenchServer(env, self.service, once=True)
        if ready is not None:
            ready.close()  # it died waiting: nothing it served, nothing to keep

    def request(self, device: str, env: Mapping[str, str], request_file: Path, result_file: Path,
                timeout_s: float) -> tuple[Served | Ended, str]:
        """The answer to one request from a process that served nothing before, and what it printed."""
        self.prepare(device, env)  # a no-op when a live one is ready
        with self._lock:
            server = self._ready.pop(server_key(device, env))
        try:
            answer = server.request(request_file, result_file, timeout_s)
            tail = server.log_since(0)
        finally:
            server.close()
        self.prepare(device, env)
        return answer, tail

    def close_all(self) -> None:
        with self._lock:
            ready, self._ready = list(self._ready.values()), {}
        for server in ready:
            server.close()


_SERVERS = BenchServers()
atexit.register(_SERVERS.close_all)
_FRESH = FreshBenchServers()
atexit.register(_FRESH.close_all)


def bench_servers() -> BenchServers:
    """The process-wide servers the evaluator reuses (closed at exit, or by `close_all`)."""
    return _SERVERS


def fresh_bench_servers() -> FreshBenchServers:
    """The process-wide one-request servers started ahead, for re-timings (closed at exit, or by `close_all`)."""
    return _FRESH


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
