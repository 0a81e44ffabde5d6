"""The real toolchain behind `cake evolve`: checker, cost model, lowering, verifier worker, timing.

* `validate`: parse, print canonically, check for the arch and backend (`cake.agents.validation`).
* `predict_ms`: `cake.ir.cost.predict` at the workload's fitness shape on the arch's device.
* `evaluate`: the contract gates in an isolated worker (`cake.verifier.worker.verify_in_worker`) on a
  schedule loaded by `cake.lowering.runtime`; on the CPU under Triton's interpreter at the contract's
  small shapes. Then the fitness:

  - with a GPU (`FitnessKind.MEASURED`): `cake bench` in a subprocess times the candidate interleaved
    with the workload's baselines at the fitness shapes, and the workload's `Fitness.score` turns the
    medians into a speedup over the best baseline;
  - without one (`FitnessKind.MODEL`): the cost model's predicted speedup over the seed schedule (the
    best predicted seed) at the fitness shape. This is a model prediction, not a timing, and every
    output of the run says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.agents.base import Checked
from cake.agents.toolchain import EvalJob
from cake.agents.validation import make_validator
from cake.ir import nodes as n
from cake.ir.checks.registry import CheckSpec
from cake.ir.parser import parse

from cake.errors import INTERNAL_EXIT_CODE, is_internal
from cake.store import CandidateStatus, Evaluation, FitnessKind, Retime

# CPU verification under the interpreter: fp32 only. bf16 is garbage there (DESIGN.md) and fp16 dots are slow;
# both are verified on the GPU.
CPU_DTYPES = ("float32",)
BENCH_MAX_SECONDS = 20.0  # wall-clock guard per shape for the interleaved sampling
_DTYPES = {"fp32": n.DType.F32, "fp16": n.DType.F16, "bf16": n.DType.BF16}


@dataclass(frozen=True, slots=True)
class EvalSettings:
    device: str  # cpu | cuda
    backend: str  # triton | cuda
    seed: int
    gate_timeout_s: float = 300.0  # per gate; a hung kernel costs at most this
    bench_timeout_s: float = 300.0  # a whole `cake bench` (GPU battery at one dtype + timing)
    verdict_cache: str | None = None  # a directory; None: the verifier's default cache
    cpu_workers: int = 1  # interpreter workers run side by side on a CPU-only machine

    def to_json(self) -> dict[str, object]:
        return {"device": self.device, "backend": self.backend, "seed": self.seed,
                "gate_timeout_s": self.gate_timeout_s, "bench_timeout_s": self.bench_timeout_s,
                "verdict_cache": self.verdict_cache, "cpu_workers": self.cpu_workers}


class CakeToolchain:
    def __init__(self, *, workload: str, op: str, arch: str, settings: EvalSettings, seeds: Sequence[Path],
                 rules: Callable[[], Sequence[CheckSpec]] | None = None):
        from cake.experiments.workload import get_workload

        self.workload = get_workload(workload)
        self.spec = self.workload.op(op)
        self.op = op
        self.arch = arch
        self.settings = settings
        self.fitness_kind = FitnessKind.MEASURED if settings.device == "cuda" else FitnessKind.MODEL
        self.shape = self.workload.fitness_shape(op)
        # rules: the learned ones (distiller); dims: budgets are proven at the fitness shape
        self._validate = make_validator(arch, settings.backend, rules, dims=self.shape.dim_map)
        self.model_baseline_ms = self._model_baseline(seeds)
        # A loader reference carries only the schedule's path; the runtime's loaders read the backend and the
        # target from the environment, which every verifier worker and bench subprocess inherits from here.
        os.environ["CAKE_BACKEND"] = settings.backend
        os.environ["CAKE_ARCH"] = arch

    # ------------------------------------------------------------------------------------ static

    def validate(self, text: str) -> Checked:
        return self._validate(text)

    def predict_ms(self, kernel: n.Kernel) -> float | None:
        from cake.ir.cost import CostError, predict

        try:
            prediction = predict(kernel, dims=self.shape.dim_map, dtype=_DTYPES[self.shape.dtype],
                                 arch_name=self.arch)
        except CostError:
            return None
        return prediction.time_ms

    def _model_baseline(self, seeds: Sequence[Path]) -> float | None:
        times = [t for t in (self.predict_ms(parse(p.read_text(), p.name)) for p in seeds) if t is not None]
        return min(times) if times else None

    def describe(self) -> str:
        if self.fitness_kind is FitnessKind.MODEL:
            return (f"No GPU: candidates are verified under Triton's CPU interpreter at the contract's small shapes "
                    f"(fp32); fitness is the COST MODEL's predicted speedup over the seed schedule at "
                    f"{self.shape.name} ({self.shape.describe()}) on {self.arch} — a model prediction, not a timing "
                    f"(fitness_kind=model).")
        return (f"GPU: candidates are verified by the contract gates on {self.settings.device}, then timed at "
                f"{self.shape.name} interleaved with {', '.join(self.workload.fitness.against)}; fitness is the "
                f"measured speedup over the best of them (fitness_kind=measured).")

    # ------------------------------------------------------------------------------------ evaluation

    def devices(self) -> tuple[str, ...]:
        if self.settings.device == "cpu":
            return ("cpu",) * max(1, self.settings.cpu_workers)
        import torch

        count = torch.cuda.device_count()
        return tuple(f"cuda:{i}" for i in range(count)) or ("cuda",)

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        started = time.monotonic()
        if device == "cpu":
            return self._verify_cpu(job, started)
        return self._bench(job, device, started)

    def _verify(self, path: Path, device: str, dtypes: Sequence[str]) -> Any:
        from cake.verifier.verdict_cache import VerdictCache
        from cake.verifier.worker import verify_in_worker
        from cake.verifier.worker_protocol import KernelRef

        from cake.cli.verify import (
            SCHEDULE_LOADER,  # the loader `cake verify/bench --schedule` use: same cache keys
        )

        cache = VerdictCache(Path(self.settings.verdict_cache)) if self.settings.verdict_cache else None
        return verify_in_worker(self.op, KernelRef.loader(SCHEDULE_LOADER, str(path)), device=device, dtypes=dtypes,
                                seed=self.settings.seed, all_gates=False, timeout_s=self.settings.gate_timeout_s,
                                cache=cache)

    def _cached_verdict(self, path: Path, dtype: str, device: str = "cuda") -> Any:
        """The verdict `cake bench` stored for this schedule at `dtype` (its key is `verify_in_worker`'s for the
        bench's arguments), or None. Nothing runs here: a miss is reported, not re-verified."""
        from cake.verifier.battery import GATE_ORDER
        from cake.verifier.verdict_cache import VerdictCache, default_cache, verdict_key
        from cake.verifier.worker_protocol import KernelRef

        from cake.cli.verify import SCHEDULE_LOADER

        key = verdict_key(kernel_ref=KernelRef.loader(SCHEDULE_LOADER, str(path)), op=self.op, device=device,
                          dtypes=[dtype], seed=self.settings.seed, gates=tuple(GATE_ORDER), all_gates=False,
                          resource_report=None)
        cache = VerdictCache(Path(self.settings.verdict_cache)) if self.settings.verdict_cache else default_cache()
        return cache.get(key)

    def _verify_cpu(self, job: EvalJob, started: float) -> Evaluation:
        from cake.verifier.worker import KernelLoadError

        try:
            verdict = self._verify(job.path, "cpu", CPU_DTYPES)
        except KernelLoadError as error:
            return _evaluation(_load_failure(str(error)), "cpu", started, error=str(error)[:4000])
        verdict_json = json.loads(verdict.to_json())
        tokens = tuple(g.replay_token for g in verdict.gates if g.replay_token)
        if not verdict.passed:
            return _evaluation(CandidateStatus.FAILED, "cpu", started, verdict=verdict_json, tokens=tokens)
        fitness = (self.model_baseline_ms / job.predicted_ms
                   if self.model_baseline_ms is not None and job.predicted_ms else None)
        timings = {k: v for k, v in (("predicted_ms", job.predicted_ms), ("model_baseline_ms", self.model_baseline_ms))
                   if v is not None}
        return _evaluation(CandidateStatus.PASSED, "cpu", started, verdict=verdict_json, timings=timings,
                           baseline_ms=self.model_baseline_ms, fitness=fitness, kind=FitnessKind.MODEL)

    def _run_bench(self, job: EvalJob, device: str, keep: Path) -> tuple[int | None, str, dict[str, Any] | None]:
        """`cake bench` on the candidate in a fresh process pinned to `device`: (exit code, or None on our
        timeout; its output; its JSON, which is also kept at `keep` with every sample)."""
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bench.json"
            command = [sys.executable, "-m", "cake", "bench", "--op", self.op, "--schedule", str(job.path),
                       "--shapes", self.shape.name, "--json", str(out), "--seed", str(self.settings.seed),
                       "--timeout", str(self.settings.gate_timeout_s), "--max-seconds", str(BENCH_MAX_SECONDS),
                       *(arg for b in self.workload.fitness.against for arg in ("--baseline", b))]
            env = dict(os.environ)
            if device.startswith("cuda:"):  # one worker per GPU: the bench (and its verifier worker) sees only its own
                index = int(device.split(":", 1)[1])
                visible = [v for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
                env["CUDA_VISIBLE_DEVICES"] = visible[index] if index < len(visible) else str(index)
            if self.settings.verdict_cache:
                env["CAKE_VERDICT_CACHE"] = self.settings.verdict_cache
            # Its own session: on our timeout the whole bench process group goes (the verifier's worker runs in a
            # session of its own and is killed by the bench's per-gate timeouts while the bench lives).
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                    start_new_session=True)
            try:
                output, _ = proc.communicate(timeout=self.settings.bench_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return None, f"bench timed out after {self.settings.bench_timeout_s:g} s", None
            data = json.loads(out.read_text()) if out.is_file() else None
            if data is not None:
                keep.write_text(json.dumps(data, indent=1) + "\n")
        return proc.returncode, output, data

    def _bench(self, job: EvalJob, device: str, started: float) -> Evaluation:
        """Verify and time a candidate with `cake bench` in its own process, pinned to one GPU: the bench runs
        the contract gates at the fitness dtype (refusing a failing kernel), then times it interleaved with
        the baselines. The verdict is then read back from the verdict cache the bench filled. The bench's JSON
        (every sample) is kept beside the candidate as `<hash>.bench.json`."""
        dtype = str(self.shape.torch_dtype).removeprefix("torch.")
        returncode, output, data = self._run_bench(job, device, job.path.with_suffix(".bench.json"))
        if returncode is None:
            return _evaluation(CandidateStatus.FAILED, device, started, error=output)
        tail = _tail(output)
        if returncode == INTERNAL_EXIT_CODE or is_internal(output):
            return _evaluation(CandidateStatus.INTERNAL, device, started, error=f"bench: {tail}"[:4000])
        if returncode == 2:  # usage: the schedule could not be lowered or loaded
            return _evaluation(CandidateStatus.ERROR, device, started, error=f"bench: {tail}"[:4000])
        verdict = self._cached_verdict(job.path, dtype)
        if verdict is None:  # the bench could not finish the battery (a gate timed out or the worker died)
            return _evaluation(CandidateStatus.FAILED, device, started, error=f"bench: {tail}"[:4000])
        verdict_json = json.loads(verdict.to_json())
        tokens = tuple(g.replay_token for g in verdict.gates if g.replay_token)
        if not verdict.passed:
            return _evaluation(CandidateStatus.FAILED, device, started, verdict=verdict_json, tokens=tokens)
        candidate_ms, baseline_ms = bench_medians(data or {}, self.shape.name)
        speedup = self.workload.fitness.speedup(candidate_ms, baseline_ms, bench_problems(data or {}, self.shape.name))
        fitness = speedup.value
        best_baseline = baseline_ms.get(speedup.best_baseline or "", {}).get(self.shape.name)  # what fitness is over
        timings = {"candidate_ms": candidate_ms.get(self.shape.name),
                   **{f"{b}_ms": t.get(self.shape.name) for b, t in baseline_ms.items()}}
        problem = None if fitness is not None else \
            f"speedup undefined: {speedup.undefined} (bench exit {returncode}): {tail}"[:4000]
        return _evaluation(CandidateStatus.PASSED if fitness is not None else CandidateStatus.FAILED, device, started,
                           verdict=verdict_json, timings={k: v for k, v in timings.items() if v is not None},
                           measured_ms=candidate_ms.get(self.shape.name), baseline_ms=best_baseline, fitness=fitness,
                           kind=FitnessKind.MEASURED, error=problem)

    def retime(self, job: EvalJob, device: str) -> Retime:
        """Time a candidate that became the best again, in a fresh `cake bench` process (its verdict is cached
        by then, so only the timing runs): what the run reports as the best is this figure, measured
        independently of the timing that selected it. Every sample is kept as `<hash>.retime.json`."""
        keep = job.path.with_suffix(".retime.json")
        returncode, output, data = self._run_bench(job, device, keep)
        if data is None:
            return Retime(job.candidate_id, None, None, None,
                          error=f"re-timing gave no result ({returncode}): {_tail(output)}"[:4000])
        candidate_ms, baseline_ms = bench_medians(data, self.shape.name)
        speedup = self.workload.fitness.speedup(candidate_ms, baseline_ms, bench_problems(data, self.shape.name))
        best = baseline_ms.get(speedup.best_baseline or "", {}).get(self.shape.name)
        return Retime(job.candidate_id, speedup.value, candidate_ms.get(self.shape.name), best,
                      error=None if speedup.value is not None else f"speedup undefined: {speedup.undefined}",
                      samples=keep.name)


def _tail(output: str, lines: int = 15) -> str:
    return "\n".join(output.strip().splitlines()[-lines:])


def bench_medians(data: Mapping[str, Any], shape: str) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Medians out of `cake bench --json`: (candidate {shape: ms}, {baseline: {shape: ms}}); a contestant that
    failed its check, or is implausibly fast, has no median here."""
    candidate: dict[str, float] = {}
    baselines: dict[str, dict[str, float]] = {}
    for report in data.get("shapes", ()):
        if report.get("shape", {}).get("name") != shape:
            continue
        for m in report.get("measurements", ()):
            if m.get("median_ms") is None or m.get("failure") or m.get("implausible"):
                continue
            if m.get("candidate"):
                candidate[shape] = float(m["median_ms"])
            else:
                baselines.setdefault(str(m["name"]), {})[shape] = float(m["median_ms"])
    return candidate, baselines


def bench_problems(data: Mapping[str, Any], shape: str) -> dict[str, str]:
    """Why each contestant of `cake bench --json` at `shape` has no median: its check failure, an implausible
    time, or a baseline that was not available (the undefined speedup names them)."""
    problems: dict[str, str] = {}
    for report in data.get("shapes", ()):
        if report.get("shape", {}).get("name") != shape:
            continue
        for m in report.get("measurements", ()):
            name = "candidate" if m.get("candidate") else str(m.get("name"))
            if m.get("failure"):
                problems[name] = str(m["failure"])
            elif m.get("implausible"):
                problems[name] = "implausibly fast (below the roofline floor)"
        for name, why in (report.get("unavailable") or {}).items():
            problems[str(name)] = f"not available: {why}"
    return problems


def _load_failure(message: str) -> CandidateStatus:
    """A kernel that could not be loaded: a CAKE bug (an internal error relayed by the worker) or an error."""
    return CandidateStatus.INTERNAL if is_internal(message) else CandidateStatus.ERROR


def _evaluation(status: CandidateStatus, device: str, started: float, *, verdict: Mapping[str, Any] | None = None,
                tokens: tuple[str, ...] = (), timings: Mapping[str, float] | None = None,
                measured_ms: float | None = None, baseline_ms: float | None = None, fitness: float | None = None,
                kind: FitnessKind | None = None, error: str | None = None) -> Evaluation:
    return Evaluation(status=status, verdict=verdict, replay_tokens=tokens, timings=dict(timings or {}),
                      measured_ms=measured_ms, baseline_ms=baseline_ms, fitness=fitness, fitness_kind=kind,
                      error=error, worker=device, seconds=time.monotonic() - started)
