"""Compiling a candidate ahead of its evaluation, on the CPU, while the GPU is busy with another one.

An evaluation on the CUDA backend compiles one specialization per (dtype, static dims) its gates call — the
kmeans assign's battery calls 5 values of `static D` in each of bf16 and fp16: 10 nvcc runs, in turn, inside
the gates (on the H200's host nvcc takes ~1.1 s a kernel, and compiling ahead saved ~3 s of a 31 s evaluation,
session 13: most of it is the gates and the workers' starts). `compile_ahead_in_worker` builds them all in a
process of its own before the evaluation starts: the gates' cases come from the verifier's plan
(`planned_cases`, a pure function of the seed), their input shapes and dtypes (`input_signature`) become
`meta` tensors, and the lowering's `compile_ahead` runs `jobs` nvcc at a time into the disk cache the
evaluation's workers read. The evaluation itself is unchanged — same gates, same seeds, same timing; its
compiles become cache hits. A specialization that fails to build is reported here and fails again, located,
inside the evaluation.

The worker runs below the evaluation's priority (`AHEAD_NICE`): the timing protocol counts the host path,
which compiles must not starve.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cake.lowering.ahead import AheadReport
from cake.process_groups import kill_group

if TYPE_CHECKING:
    import torch

    from cake.verifier.worker_protocol import KernelRef

AHEAD_NICE = 10  # added niceness of the compile worker and its nvcc runs
# A candidate's battery compiles ~10 specializations (kmeans: 5 static D x 2 dtypes); 8 nvcc at a time take them
# in two rounds, so a pool of P compile workers prepares P // 8 candidates side by side.
NVCC_JOBS_PER_CANDIDATE = 8
ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class AheadRequest:
    op: str
    kernel: KernelRef
    dtypes: tuple[str, ...]  # the dtypes the evaluation verifies, fitness dtype first
    seeds: tuple[int, ...]  # the verifier seeds whose batteries it runs
    capability: tuple[int, int]  # the device's compute capability: it picks the nvcc target
    jobs: int  # nvcc runs at a time

    def to_json(self) -> dict[str, object]:
        return {"op": self.op, "kernel": self.kernel.to_json(), "dtypes": list(self.dtypes), "seeds": list(self.seeds),
                "capability": list(self.capability), "jobs": self.jobs}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> AheadRequest:
        from cake.verifier.worker_protocol import KernelRef

        major, minor = (int(v) for v in data["capability"])
        return AheadRequest(str(data["op"]), KernelRef.from_json(dict(data["kernel"])),
                            tuple(str(d) for d in data["dtypes"]), tuple(int(s) for s in data["seeds"]),
                            (major, minor), int(data["jobs"]))


@dataclass(frozen=True, slots=True)
class AheadOutcome:
    """What compiling one candidate ahead did: the lowering's report, or why there is none (the schedule did not
    load, the worker died or ran out of time — the evaluation then meets the same problem itself, or compiles
    what is missing). `seconds`: the worker's whole wall time, process start included."""

    report: AheadReport | None
    seconds: float
    problem: str | None = None

    def summary(self) -> str:
        text = self.report.summary() if self.report is not None else f"no report: {self.problem}"
        return f"{text} in {self.seconds:.1f} s"

    def to_json(self) -> dict[str, object]:
        return {"report": None if self.report is None else self.report.to_json(), "seconds": self.seconds,
                "problem": self.problem}


def planned_calls(op: str, dtypes: Sequence[str], seeds: Sequence[int], device: str = "cuda"
                  ) -> list[tuple[torch.Tensor | None, ...]]:
    """The inputs of every call the batteries for `dtypes` under `seeds` make, as `meta` tensors, one per distinct
    input signature, in battery order."""
    import torch

    from cake.verifier.battery import planned_cases
    from cake.verifier.inputs import input_signature
    from cake.verifier.registry import get_contract

    contract = get_contract(op)
    signatures: dict[Any, None] = {}
    for seed in seeds:
        for dtype in dtypes:
            for case in planned_cases(contract, device=device, dtypes=[dtype], seed=seed):
                signatures.setdefault(input_signature(contract, case), None)
    return [tuple(None if s is None else torch.empty(s[0], dtype=s[1], device="meta") for s in signature)
            for signature in signatures]


class AheadProcesses:
    """The compile workers alive now, so that an executor closing (a run's end, a spent budget) kills them and
    their nvcc runs instead of waiting for compiles nobody will use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[str]] = set()
        self._closed = False

    def start(self, command: list[str], env: Mapping[str, str]) -> subprocess.Popen[str] | None:
        with self._lock:
            if self._closed:
                return None
            # Its own session: a timeout or a close kills the worker's process group, nvcc runs included.
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env=dict(env), start_new_session=True)
            self._live.add(proc)
            return proc

    def finished(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._live.discard(proc)

    def kill_all(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._live)
        for proc in live:
            kill_group(proc)


def compile_ahead_in_worker(request: AheadRequest, *, timeout_s: float, processes: AheadProcesses | None = None
                            ) -> AheadOutcome:
    """Run `python -m cake.evaluation.ahead_worker` for `request`: the candidate's specializations compiled into
    the disk cache, or why not. A worker that dies, hangs past `timeout_s` or is killed by `processes` is an
    outcome with the problem, never an exception."""
    started = time.monotonic()
    processes = processes or AheadProcesses()
    with tempfile.TemporaryDirectory(prefix="cake-ahead-") as tmp:
        request_file, result_file = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request_file.write_text(json.dumps(request.to_json()))
        command = [sys.executable, "-m", "cake.evaluation.ahead_worker", str(request_file), str(result_file)]
        proc = processes.start(command, os.environ)
        if proc is None:
            return AheadOutcome(None, time.monotonic() - started, "not started: the executor is closing")
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.communicate()
            return AheadOutcome(None, time.monotonic() - started, f"compile worker timed out after {timeout_s:g} s")
        finally:
            processes.finished(proc)
        result: Mapping[str, Any] = json.loads(result_file.read_text()) if result_file.is_file() else {}
    seconds = time.monotonic() - started
    if "report" in result:
        return AheadOutcome(AheadReport.from_json(dict(result["report"])), seconds)
    if "error" in result:
        return AheadOutcome(None, seconds, str(result["error"])[:ERROR_CHARS])
    tail = "\n".join(output.strip().splitlines()[-15:])
    return AheadOutcome(None, seconds, f"compile worker exited {proc.returncode}: {tail}"[:ERROR_CHARS])
