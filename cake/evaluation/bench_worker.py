"""The isolated bench process: `python -m cake.evaluation.bench_worker REQUEST.json RESULT.json`.

The evaluator times each candidate in a process pinned to one GPU (CUDA_VISIBLE_DEVICES), so a kernel that
corrupts its context or hangs costs only that process: this one-shot worker, or a bench server that answers many
requests (`cake.evaluation.bench_server`) and ends itself after any that was not clean. Both serve a request the
same way, through `BenchService`: the request is a `BenchRequest` and the result a `BenchTimes`, both as typed JSON,
with the whole `BenchRun` beside it (every sample, kept by the evaluator next to the candidate); a setup failure is
written as {"error": ...} with exit status 2, and a bug in CAKE (`InternalError`) as {"internal": ...} with exit
status `INTERNAL_EXIT_CODE`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cake.errors import INTERNAL_EXIT_CODE, InternalError
from cake.evaluation.bench import BenchRun, BenchSetupError, bench_kernel, request_from_json
from cake.evaluation.bench_server import Served

if TYPE_CHECKING:
    from cake.verifier.worker import Worker

EXIT_SETUP = 2


def clean(run: BenchRun) -> bool:
    """No candidate measurement failed: whatever ran the candidate here left the CUDA context as it found it (a
    refused candidate ran only in its verifier worker)."""
    return all(r.candidate is None or not r.candidate.failure for r in run.reports)


def warm_imports() -> None:
    """Import what serving a request imports (torch, the timing clock, the workloads, the verifier's worker client), so
    a process started ahead of its request (`FreshBenchServers`) has paid that before the request arrives. CUDA itself
    is not started: an idle process holds no context on the GPU that other processes are timing on."""
    import torch  # noqa: F401

    from cake.experiments import workload  # noqa: F401
    from cake.verifier import timing, worker, worker_main  # noqa: F401


class BenchService:
    """Serves bench requests in this process. Between requests it may hold a verifier worker started ahead (`spare`),
    which the next request's gates run in, so that process start is not on the next evaluation's path."""

    def __init__(self) -> None:
        self._spare: Worker | None = None

    def prepare(self) -> None:
        """Pay now what serving a request imports (a server started ahead of its one request calls this at start; a
        server of many does not: its first request's verifier worker starts while this process imports)."""
        warm_imports()

    def serve(self, request_file: Path, result_file: Path) -> Served:
        """Bench one request; `reusable` when the candidate timed cleanly or never ran in this process."""
        request = request_from_json(json.loads(request_file.read_text()))
        spare, self._spare = self._spare, None
        try:
            run = bench_kernel(request, spare=spare)
        except BenchSetupError as error:
            result_file.write_text(json.dumps({"error": str(error)}))
            return Served(EXIT_SETUP, reusable=False)
        except InternalError as error:  # a CAKE bug, reported as one: never a verdict about the candidate
            result_file.write_text(json.dumps({"internal": error.report()}))
            return Served(INTERNAL_EXIT_CODE, reusable=False)
        result_file.write_text(json.dumps({"times": run.times().to_json(), "run": run.to_json()}))
        return Served(0, reusable=clean(run))

    def start_spare(self) -> None:
        """Start the next request's verifier worker now (a bench server calls this once it has answered)."""
        from cake.verifier.worker import Worker

        if self._spare is None:
            self._spare = Worker(None, "cuda")

    def close(self) -> None:
        if self._spare is not None:
            self._spare.abandon()
            self._spare = None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m cake.evaluation.bench_worker REQUEST.json RESULT.json", file=sys.stderr)
        return EXIT_SETUP
    service = BenchService()
    try:
        return service.serve(Path(argv[0]), Path(argv[1])).status
    finally:
        service.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
