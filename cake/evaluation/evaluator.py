"""`ScheduleEvaluator`: the real evaluator behind `cake evolve` — one `.cake` candidate in, one `Evaluation` out.

* On the CPU: the contract gates in an isolated verifier worker (`verify_in_worker`), the schedule lowered
  and run under Triton's interpreter at the contract's small shapes, fp32. Fitness is the cost model's
  predicted speedup over the seed schedule (`FitnessKind.MODEL`): a prediction, not a timing.
* On a GPU: a bench process pinned to that GPU (by default this process's bench server for the device,
  `cake.evaluation.bench_server`, which serves one evaluation after another; with `reuse_bench_process` off a
  one-shot `cake.evaluation.bench_worker` each) runs the gates at the fitness dtype and then every other dtype the schedule declares (`declared_dtypes`; the loop used to verify
  bf16 only though schedules declare f16 too), all in one verifier worker, and when they all pass times the
  candidate interleaved with the workload's baselines; it answers with typed `BenchTimes`, and the workload's
  `Fitness.score` turns them into the speedup over the best baseline (`FitnessKind.MEASURED`; undefined, with the
  reason, when a baseline has no time). The verdicts are read back from the verdict cache it filled; a candidate
  fails when any dtype fails. (The other dtypes used to be verified after the timing, in a second worker: one
  more process start, ~5 s of an evaluation's ~31 on the H200.) The worker's whole run (every sample) is kept
  beside the candidate as `<hash>.bench.json`.
* `confirm` (the loop calls it for a candidate that would become the best): the gates again under
  `MULTI_SEEDS` seeds, in every declared dtype on a GPU (fp32 under the interpreter), in one worker.
* `compile_ahead` (a local pool calls it for queued jobs while the GPU works): the CUDA specializations the GPU
  evaluation will call, built in a worker of their own into the cubin cache the evaluation then reads
  (`cake.evaluation.ahead`); the evaluation itself is unchanged.
* `retime`: a candidate that became the best is timed again in a fresh bench worker (its verdict is cached
  by then, so only the timing runs); the run reports that figure (`Retime`, samples in `<hash>.retime.json`).

The kernel reference names the schedule with its backend, arch and params explicitly (`KernelSpec`), so
nothing travels through environment variables. The evaluator is a frozen dataclass of plain values: an
executor may pickle it to another process or host.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cake.errors import INTERNAL_EXIT_CODE, is_internal
from cake.evaluation.bench import BenchRequest, BenchTimes, request_to_json
from cake.evaluation.protocol import EvalJob
from cake.runs.store import CandidateStatus, Evaluation, FitnessKind, Retime

if TYPE_CHECKING:
    from cake.evaluation.ahead import AheadOutcome, AheadProcesses
    from cake.stats import Speedup
    from cake.verifier.results import Verdict
    from cake.verifier.worker import SpareWorkers
    from cake.verifier.worker_protocol import KernelRef

# CPU verification under the interpreter: fp32 only. bf16 is garbage there (DESIGN.md) and fp16 dots are slow;
# both are verified on the GPU.
CPU_DTYPES = ("float32",)
BENCH_MAX_SECONDS = 20.0  # wall-clock guard per shape for the interleaved sampling
# A fitness is taken against the fastest baseline, so a baseline over this many times slower than the fastest stops
# being sampled after the protocol's minimum reps (`TimingConfig.retire_ratio`): at the kmeans cell torch_mm (24 ms a
# call against triton_assign's 1.1 ms) was 2.4 s of every evaluation's 2.9 s of sampling and of every retime's.
BASELINE_RETIRE_RATIO = 3.0
# What each timed shape past the first adds to a bench worker's time limit: the sampling guard above, the inputs,
# and a baseline's first call there (fla autotunes each new shape: ~60 s at KDA's six in a fresh process).
BENCH_SECONDS_PER_EXTRA_SHAPE = 90.0
# What each dtype gated beside the timed one adds to a bench worker's time limit (KDA's battery took 59-84 s a dtype
# on the H200).
BENCH_SECONDS_PER_EXTRA_DTYPE = 150.0
ERROR_CHARS = 4000  # an error kept in the store: the tail that names the problem, not a whole log


@dataclass(frozen=True, slots=True)
class EvalSettings:
    device: str  # cpu | cuda
    backend: str  # triton | cuda
    seed: int
    gate_timeout_s: float = 300.0  # per gate; a hung kernel costs at most this
    bench_timeout_s: float = 300.0  # a whole bench worker (GPU battery at one dtype + timing at one shape)
    verdict_cache: str | None = None  # a directory; None: the verifier's default cache
    cpu_workers: int = 1  # interpreter workers run side by side on a CPU-only machine
    # GPU evaluations on a bench server per device (`cake.evaluation.bench_server`: one process start per run, not
    # per evaluation; a re-timing takes a fresh process started ahead for it); False: a one-shot bench process each
    reuse_bench_process: bool = True

    def to_json(self) -> dict[str, object]:
        return {"device": self.device, "backend": self.backend, "seed": self.seed,
                "gate_timeout_s": self.gate_timeout_s, "bench_timeout_s": self.bench_timeout_s,
                "verdict_cache": self.verdict_cache, "cpu_workers": self.cpu_workers,
                "reuse_bench_process": self.reuse_bench_process}


@dataclass(frozen=True, slots=True)
class KernelSpec:
    """A schedule file lowered with an explicit backend, arch and params: everything that decides the kernel."""

    path: Path
    backend: str
    arch: str | None = None
    params: tuple[tuple[str, int], ...] = ()
    loader: str | None = None  # "module:function" with the lowering's loader signature; None: the lowering's

    def ref(self) -> KernelRef:
        from cake.lowering.runtime import SCHEDULE_LOADER
        from cake.verifier.worker_protocol import KernelRef

        options = {"backend": self.backend, **({"arch": self.arch} if self.arch else {}),
                   **({"params": json.dumps(dict(self.params), sort_keys=True)} if self.params else {})}
        return KernelRef.loader(self.loader or SCHEDULE_LOADER, str(self.path), options)


@dataclass(frozen=True, slots=True)
class ScheduleEvaluator:
    op: str
    workload: str
    arch: str
    settings: EvalSettings
    model_baseline_ms: float | None = None  # the best predicted seed: the CPU fitness is relative to it
    against: tuple[str, ...] = field(default_factory=tuple)  # baselines the GPU fitness is measured against

    @property
    def timed_shapes(self) -> tuple[str, ...]:
        """Every shape a GPU evaluation times: the op's fitness shapes (`Workload.fitness_for`), `shape` first."""
        from cake.experiments.workload import get_workload

        return get_workload(self.workload).fitness_for(self.op).shapes

    @property
    def shape(self) -> str:
        """The first fitness shape: a candidate's `measured_ms` is its median there, and the fitness dtype is its."""
        return self.timed_shapes[0]

    @property
    def bench_timeout_s(self) -> float:
        return self.settings.bench_timeout_s + BENCH_SECONDS_PER_EXTRA_SHAPE * (len(self.timed_shapes) - 1)

    def gated_bench_timeout_s(self, gate_dtypes: Sequence[str]) -> float:
        """`bench_timeout_s` for a bench that also gates `gate_dtypes` before it times."""
        return self.bench_timeout_s + BENCH_SECONDS_PER_EXTRA_DTYPE * len(gate_dtypes)

    def kernel(self, path: Path) -> KernelSpec:
        from cake.experiments.workload import schedule_loader_for

        return KernelSpec(path, self.settings.backend, self.arch, loader=schedule_loader_for(self.op))

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        started = time.monotonic()
        if device == "cpu":
            return self._verify_cpu(job, started)
        return self._bench(job, device, started)

    # ------------------------------------------------------------------------------------ CPU

    def verify(self, path: Path, device: str, dtypes: Sequence[str]) -> Verdict:
        from cake.verifier.verdict_cache import VerdictCache
        from cake.verifier.worker import verify_in_worker

        cache = VerdictCache(Path(self.settings.verdict_cache)) if self.settings.verdict_cache else None
        ref = self.kernel(path).ref()
        return verify_in_worker(self.op, ref, device=device, dtypes=dtypes, seed=self.settings.seed, all_gates=False,
                                timeout_s=self.settings.gate_timeout_s, cache=cache, spares=spare_workers())

    def _verify_cpu(self, job: EvalJob, started: float) -> Evaluation:
        from cake.verifier.worker import KernelLoadError

        try:
            verdict = self.verify(job.path, "cpu", CPU_DTYPES)
        except KernelLoadError as error:
            return _evaluation(_load_failure(str(error)), "cpu", started, error=str(error)[:ERROR_CHARS])
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

    # ------------------------------------------------------------------------------------ GPU

    def cached_verdict(self, path: Path, dtype: str, device: str = "cuda") -> Verdict | None:
        """The verdict the bench worker stored for this schedule at `dtype` (its key is `verify_in_worker`'s
        for the bench's arguments), or None. Nothing runs here: a miss is reported, not re-verified."""
        from cake.verifier.battery import GATE_ORDER
        from cake.verifier.verdict_cache import VerdictCache, default_cache, verdict_key

        key = verdict_key(kernel_ref=self.kernel(path).ref(), op=self.op, device=device, dtypes=[dtype],
                          seed=self.settings.seed, gates=tuple(GATE_ORDER), all_gates=False, resource_report=None)
        cache = VerdictCache(Path(self.settings.verdict_cache)) if self.settings.verdict_cache else default_cache()
        return cache.get(key)

    def _request(self, path: Path, gate_dtypes: tuple[str, ...] = ()) -> BenchRequest:
        from cake.experiments.workload import get_workload

        spec = get_workload(self.workload).op(self.op)
        shapes = tuple(spec.shape(name) for name in self.timed_shapes)
        return BenchRequest(self.op, self.kernel(path).ref(), shapes, self.against, seed=self.settings.seed,
                            gate_timeout_s=self.settings.gate_timeout_s, max_seconds=BENCH_MAX_SECONDS,
                            gate_dtypes=gate_dtypes, retire_ratio=BASELINE_RETIRE_RATIO)

    def _bench(self, job: EvalJob, device: str, started: float) -> Evaluation:
        # The bench gates every declared dtype (the fitness dtype first) in one verifier worker before it times.
        dtypes = self.declared_dtypes(job.path)
        dtype, others = dtypes[0], dtypes[1:]
        request = self._request(job.path, gate_dtypes=others)
        outcome, problem = run_bench_worker(request, device, timeout_s=self.gated_bench_timeout_s(others),
                                            verdict_cache=self.settings.verdict_cache,
                                            keep=job.path.with_suffix(".bench.json"),
                                            reuse=self.settings.reuse_bench_process)
        if isinstance(outcome, str):  # the worker could not start: the schedule did not lower or load, or CAKE broke
            return _evaluation(_load_failure(outcome), device, started, error=f"bench: {outcome}"[:ERROR_CHARS])
        verdict = self.cached_verdict(job.path, dtype)
        if verdict is None:  # the bench refused it on a verdict no cache keeps (a gate's RUNTIME_ERROR or TIMEOUT),
            # or could not finish the battery (the worker died)
            refused = outcome.refused if isinstance(outcome, BenchTimes) else None
            why = f"refused by the gates: {refused}" if refused else problem or "no verdict and no reason given"
            return _evaluation(CandidateStatus.FAILED, device, started, error=f"bench: {why}"[:ERROR_CHARS])
        if not verdict.passed:
            return _evaluation(CandidateStatus.FAILED, device, started, verdict=json.loads(verdict.to_json()),
                               tokens=_tokens(verdict))
        for other in others:  # the schedule serves these too: a failure in one fails the candidate
            more = self.cached_verdict(job.path, other)
            if more is None or not more.passed:
                why = "no verdict (a gate timed out or the worker died)" if more is None else "failed"
                return _evaluation(CandidateStatus.FAILED, device, started,
                                   verdict=None if more is None else json.loads(more.to_json()),
                                   tokens=() if more is None else _tokens(more),
                                   error=f"fails in {other}: {why} (passed {dtype}); bench: {problem}"[:ERROR_CHARS])
        verdict_json = json.loads(verdict.to_json())
        if outcome is None:  # verified, then the timing died or ran out of time
            return _evaluation(CandidateStatus.FAILED, device, started, verdict=verdict_json,
                               error=f"bench: {problem}"[:ERROR_CHARS])
        speedup, best_baseline = self._speedup(outcome)
        fitness = speedup.value
        timings = _timings(outcome, self.timed_shapes)
        error = None if fitness is not None else \
            f"speedup undefined: {outcome.refused or speedup.undefined}: {problem}"[:ERROR_CHARS]
        return _evaluation(CandidateStatus.PASSED if fitness is not None else CandidateStatus.FAILED, device, started,
                           verdict=verdict_json, timings={k: v for k, v in timings.items() if v is not None},
                           measured_ms=outcome.candidate.get(self.shape), baseline_ms=best_baseline, fitness=fitness,
                           kind=FitnessKind.MEASURED, error=error)

    def _speedup(self, outcome: BenchTimes) -> tuple[Speedup, float | None]:
        """The workload's speedup over the best of its baselines, and that baseline's median (what the
        fitness is over; None when the speedup is undefined)."""
        from cake.experiments.workload import get_workload

        # the run's baselines (`cake evolve --against` may name fewer than the op declares)
        fitness = get_workload(self.workload).fitness_for(self.op).over(self.against)
        speedup = fitness.speedup(outcome.candidate, outcome.baselines, outcome.problems)
        return speedup, outcome.baselines.get(speedup.best_baseline or "", {}).get(self.shape)

    def retime(self, job: EvalJob, device: str) -> Retime:
        """Time a candidate that became the best again, in a fresh bench worker on `device` (its verdict is
        cached by then, so only the timing runs): what the run reports as the best is this figure, measured
        independently of the timing that selected it. Every sample is kept as `<hash>.retime.json`."""
        keep = job.path.with_suffix(".retime.json")
        # A run on bench servers re-times in a process started ahead for it alone (after its first re-timing, which
        # starts the next): as fresh as a one-shot worker, without the process start on the run's path.
        outcome, problem = run_bench_worker(self._request(job.path), device, timeout_s=self.bench_timeout_s,
                                            verdict_cache=self.settings.verdict_cache, keep=keep,
                                            started_ahead=self.settings.reuse_bench_process)
        samples = keep.name if keep.is_file() else None
        if not isinstance(outcome, BenchTimes):
            return Retime(job.candidate_id, None, None, None,
                          error=f"re-timing gave no result: {outcome or problem}"[:ERROR_CHARS], samples=samples)
        speedup, best_baseline = self._speedup(outcome)
        error = None if speedup.value is not None else \
            f"speedup undefined: {outcome.refused or speedup.undefined}"[:ERROR_CHARS]
        return Retime(job.candidate_id, speedup.value, outcome.candidate.get(self.shape), best_baseline,
                      error=error, samples=samples)


    def close(self) -> None:
        """End this process's bench servers (`reuse_bench_process`) and its spare verifier workers; the next
        evaluation starts fresh ones."""
        from cake.evaluation.bench_server import bench_servers, fresh_bench_servers

        bench_servers().close_all()
        fresh_bench_servers().close_all()
        spare_workers().close()

    # ------------------------------------------------------------------------------------ ahead

    def compile_ahead(self, job: EvalJob, jobs: int, processes: AheadProcesses | None = None) -> AheadOutcome | None:
        """Compile, in a worker of its own, every specialization the GPU evaluation of `job` will call (its gates
        at the run's seed in every dtype it verifies; the timing shape is one of them), so the evaluation finds
        them in the disk cache (`cake.evaluation.ahead`). None where nothing is compiled per call: the CPU
        (Triton's interpreter) and the Triton backend (it compiles at launch)."""
        from cake.arch import arch as arch_spec
        from cake.evaluation.ahead import AheadRequest, compile_ahead_in_worker

        if self.settings.device == "cpu" or self.settings.backend != "cuda":
            return None
        request = AheadRequest(self.op, self.kernel(job.path).ref(), self.declared_dtypes(job.path),
                               (self.settings.seed,), arch_spec(self.arch).compute_capability, jobs)
        return compile_ahead_in_worker(request, timeout_s=self.settings.bench_timeout_s, processes=processes)

    # ------------------------------------------------------------------------------------ promotion

    def declared_dtypes(self, path: Path) -> tuple[str, ...]:
        """The contract dtypes the schedule declares (`dtype T in {...}`) and the run's backend can lower
        (`servable_dtype_bindings`: the CUDA backend refuses every f32 call of a `via dot` schedule, so f32 is
        not one of them there), fitness dtype first; the fitness dtype alone when the schedule declares no
        type variable."""
        from cake.experiments.workload import get_workload
        from cake.ir import nodes as n
        from cake.ir.check import servable_dtype_bindings
        from cake.ir.parser import parse
        from cake.verifier.registry import get_contract
        from cake.verifier.tolerance import dtype_name

        names = {n.DType.F32: "float32", n.DType.F16: "float16", n.DType.BF16: "bfloat16"}
        fitness = str(get_workload(self.workload).op(self.op).shape(self.shape).torch_dtype).removeprefix("torch.")
        known = {dtype_name(d) for d in get_contract(self.op).dtypes}
        kernel = parse(path.read_text(), path.name)
        served = servable_dtype_bindings(kernel, arch=self.arch, backend=self.settings.backend, file=path.name)
        declared = [names[c] for binding in served for c in binding.values() if c in names]
        return tuple(dict.fromkeys([fitness] + [d for d in declared if d in known]))

    def confirm(self, job: EvalJob, device: str, evaluation: Evaluation) -> Evaluation:
        """`evaluation` (annotated with what was confirmed) when the gates pass under every seed of
        MULTI_SEEDS (and the run's own) in every declared dtype; else FAILED with the failing seed's verdict.
        Each (seed, dtype) is its own cached battery, so the run's seed, gated by the bench, is not run again."""
        from cake.verifier.multiseed import MULTI_SEEDS, verify_seeds_per_dtype_in_worker
        from cake.verifier.verdict_cache import VerdictCache
        from cake.verifier.worker import KernelLoadError

        dtypes = CPU_DTYPES if device == "cpu" else self.declared_dtypes(job.path)
        cache = VerdictCache(Path(self.settings.verdict_cache)) if self.settings.verdict_cache else None
        seeds = tuple(dict.fromkeys((self.settings.seed, *MULTI_SEEDS)))
        ref = self.kernel(job.path).ref()
        try:
            results = verify_seeds_per_dtype_in_worker(self.op, ref, seeds=seeds, device=device, dtypes=dtypes,
                                                       all_gates=False, timeout_s=self.settings.gate_timeout_s,
                                                       cache=cache, spares=spare_workers())
        except KernelLoadError as error:
            return replace(evaluation, status=_load_failure(str(error)), fitness=None,
                           error=f"confirm: {error}"[:ERROR_CHARS])
        summary = "; ".join(f"{dtype}: {result.summary()}" for dtype, result in results.items())
        confirmed = {"seeds": list(seeds), "dtypes": list(dtypes), "summary": summary}
        failing = next((r.first_failure for r in results.values() if r.first_failure is not None), None)
        if failing is None:
            return replace(evaluation, verdict={**dict(evaluation.verdict or {}), "confirmed": confirmed})
        return replace(evaluation, status=CandidateStatus.FAILED, fitness=None,
                       verdict={**json.loads(failing.to_json()), "confirmed": confirmed},
                       replay_tokens=tuple(t for r in results.values() for t in r.replay_tokens()),
                       error=f"not confirmed as best: {summary}"[:ERROR_CHARS])


_SPARES: SpareWorkers | None = None
_SPARES_LOCK = threading.Lock()


def spare_workers() -> SpareWorkers:
    """This process's verifier workers started ahead (`cake.verifier.worker.SpareWorkers`): the CPU verification and
    the confirmation of a new best take one each instead of starting a process (ended at exit, or by `close`)."""
    global _SPARES
    with _SPARES_LOCK:  # the executor's slots evaluate in threads
        if _SPARES is None:
            from cake.verifier.worker import SpareWorkers

            _SPARES = SpareWorkers()
            atexit.register(_SPARES.close)
        return _SPARES


def run_bench_worker(request: BenchRequest, device: str, *, timeout_s: float, verdict_cache: str | None = None,
                     keep: Path | None = None, reuse: bool = False,
                     started_ahead: bool = False) -> tuple[BenchTimes | str | None, str]:
    """Run the bench pinned to `device` ("cuda" or "cuda:N"): (BenchTimes, its output tail) when it timed or refused
    the candidate; (reason, tail) when it could not start or hit a CAKE internal error (the reason then carries the
    internal-error marker); (None, tail) when it died or ran past `timeout_s`. The run, every sample included, is
    written to `keep` when given. `reuse`: on this process's bench server for the device (`cake.evaluation.
    bench_server`: no process start per evaluation); else in a process of its own (what a re-timing wants: a figure
    measured in a fresh process), with `started_ahead` one started before the request for it alone (`FreshBenchServers`:
    its start off the request's path), else a one-shot worker started now."""
    from cake.evaluation.bench_server import Ended, bench_servers, fresh_bench_servers

    if reuse and started_ahead:
        raise ValueError("a bench request is served on the shared server (reuse) or in a fresh process started ahead "
                         "(started_ahead), not both")
    with tempfile.TemporaryDirectory() as tmp:
        request_file, result_file = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request_file.write_text(json.dumps(request_to_json(request)))
        env = _bench_env(device, verdict_cache)
        if reuse or started_ahead:
            servers = bench_servers() if reuse else fresh_bench_servers()
            answer, output = servers.request(device, env, request_file, result_file, timeout_s)
            if isinstance(answer, Ended):
                if answer.timed_out:
                    return None, f"bench timed out after {timeout_s:g} s"
                returncode: int | None = answer.returncode
            else:
                returncode = answer.status
        else:
            outcome = _run_once(env, request_file, result_file, timeout_s)
            if outcome is None:
                return None, f"bench timed out after {timeout_s:g} s"
            returncode, output = outcome
        tail = "\n".join(output.strip().splitlines()[-15:])
        result: Mapping[str, Any] = json.loads(result_file.read_text()) if result_file.is_file() else {}
    if keep is not None and "run" in result:
        keep.write_text(json.dumps(result["run"], indent=1) + "\n")
    if "internal" in result:
        return str(result["internal"]), tail
    if returncode == INTERNAL_EXIT_CODE or is_internal(output):
        return f"{tail}" if is_internal(tail) else f"internal error in CAKE (bench worker): {tail}", tail
    if "error" in result:
        return str(result["error"]), tail
    if "times" in result:
        return BenchTimes.from_json(result["times"]), tail
    return None, f"bench worker exited {returncode}: {tail}"


def _bench_env(device: str, verdict_cache: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if device.startswith("cuda:"):  # one worker per GPU: the bench (and its verifier worker) sees only its own
        index = int(device.split(":", 1)[1])
        visible = [v for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[index] if index < len(visible) else str(index)
    if verdict_cache:
        env["CAKE_VERDICT_CACHE"] = verdict_cache
    return env


def _run_once(env: Mapping[str, str], request_file: Path, result_file: Path,
              timeout_s: float) -> tuple[int, str] | None:
    """(exit status, output) of a one-shot bench worker; None when it ran past `timeout_s` (its group is killed)."""
    command = [sys.executable, "-m", "cake.evaluation.bench_worker", str(request_file), str(result_file)]
    # Its own session: on our timeout the whole bench process group goes (the verifier's worker runs in a
    # session of its own and is killed by the bench's per-gate timeouts while the bench lives).
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(env),
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return proc.returncode, output


def _tokens(verdict: Verdict) -> tuple[str, ...]:
    return tuple(g.replay_token for g in verdict.gates if g.replay_token)


def _load_failure(message: str) -> CandidateStatus:
    """A kernel that could not be loaded or benched: a CAKE bug (an internal error relayed by a worker) or an
    error of the candidate."""
    return CandidateStatus.INTERNAL if is_internal(message) else CandidateStatus.ERROR


def _timings(outcome: BenchTimes, shapes: Sequence[str]) -> dict[str, float | None]:
    """Each contestant's median at the first shape as `<name>_ms` (what `cake report` turns into speedups over
    `measured_ms`), and at every further shape as `<name>_ms@<shape>`."""
    contestants = {"candidate": outcome.candidate, **outcome.baselines}
    return {f"{name}_ms{'' if i == 0 else '@' + shape}": times.get(shape)
            for i, shape in enumerate(shapes) for name, times in contestants.items()}


def _evaluation(status: CandidateStatus, device: str, started: float, *, verdict: Mapping[str, Any] | None = None,
                tokens: tuple[str, ...] = (), timings: Mapping[str, float] | None = None,
                measured_ms: float | None = None, baseline_ms: float | None = None, fitness: float | None = None,
                kind: FitnessKind | None = None, error: str | None = None) -> Evaluation:
    return Evaluation(status=status, verdict=verdict, replay_tokens=tokens, timings=dict(timings or {}),
                      measured_ms=measured_ms, baseline_ms=baseline_ms, fitness=fitness, fitness_kind=kind,
                      error=error, worker=device, seconds=time.monotonic() - started)
