"""Bench orchestration: verify a kernel on the GPU, then time it interleaved with its baselines.

`bench_kernel` is what `cake bench` runs and what the evaluator's bench worker runs; it returns a typed
`BenchRun` (per shape, every contestant's `Measurement`). `BenchRun.times()` reduces it to the medians the
fitness is computed from (`BenchTimes`), which is what crosses a process boundary — as typed JSON, never as
text parsed from a command's output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cake.errors import InternalError

if TYPE_CHECKING:
    from cake.arch import DeviceSpec
    from cake.experiments.workload import OpSpec, Pipeline, Prepared, Shape
    from cake.verifier.timing import Clock, CudaClock, Measurement, Samples, TimingConfig, Verification
    from cake.verifier.worker import Worker
    from cake.verifier.worker_protocol import KernelRef


class BenchSetupError(RuntimeError):
    """The bench cannot start: no GPU, an unknown device, a kernel that does not load, a bad shape."""


@dataclass(frozen=True, slots=True)
class ShapeReport:
    shape: Shape
    measurements: tuple[Measurement, ...]
    unavailable: tuple[tuple[str, str], ...]  # baselines that could not run: (name, why)

    @property
    def candidate(self) -> Measurement | None:
        return next((m for m in self.measurements if m.candidate), None)

    def to_json(self) -> dict[str, object]:
        return {"shape": self.shape.to_json(), "measurements": [m.to_json() for m in self.measurements],
                "unavailable": dict(self.unavailable)}


@dataclass(frozen=True, slots=True)
class BenchTimes:
    """Medians in ms of the contestants that were timed, passed their checks and were plausible:
    `candidate[shape]` and `baselines[name][shape]`; `problems[name]` says why a contestant ("candidate" or a
    baseline) has no median (an undefined speedup names them); `refused` why the candidate was not timed."""

    candidate: dict[str, float] = field(default_factory=dict)
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    refused: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"candidate": self.candidate, "baselines": self.baselines, "problems": self.problems,
                "refused": self.refused}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> BenchTimes:
        return BenchTimes({str(k): float(v) for k, v in dict(data["candidate"]).items()},
                          {str(b): {str(k): float(v) for k, v in dict(t).items()}
                           for b, t in dict(data["baselines"]).items()},
                          {str(k): str(v) for k, v in dict(data.get("problems") or {}).items()},
                          None if data.get("refused") is None else str(data["refused"]))


@dataclass(frozen=True, slots=True)
class BenchRun:
    op: str
    kernel: str  # the kernel reference, described
    device_name: str
    reports: tuple[ShapeReport, ...] = ()
    refused: tuple[tuple[str, Verification], ...] = ()  # dtypes whose gates the kernel failed: not timed
    # Wall seconds of each step of `bench_kernel` (verify_<dtype>, load, baselines, time_<shape>): where a bench
    # spends its time, kept with its samples; never part of a result.
    stages: tuple[tuple[str, float], ...] = ()
    # Whether the verifier worker was started before this request arrived (a bench server's spare), so its process
    # start was off this evaluation's path; kept with the stages for the same reason.
    verifier_ahead: bool = False

    @property
    def all_timed(self) -> bool:
        """Every shape timed, checked and plausible (and nothing refused)."""
        return not self.refused and all(
            r.candidate is not None and not r.candidate.failure and not r.candidate.implausible for r in self.reports)

    def times(self) -> BenchTimes:
        if self.refused:
            return BenchTimes(refused="; ".join(f"{d}: {v.detail}" for d, v in self.refused))
        times = BenchTimes()
        for report in self.reports:
            for name, why in report.unavailable:
                times.problems[name] = f"not available: {why}"
            for m in report.measurements:
                name = "candidate" if m.candidate else m.name
                if m.failure or m.implausible:
                    times.problems[name] = m.failure or "implausibly fast (below the roofline floor)"
                if m.median_ms is None or m.failure or m.implausible:
                    continue
                if m.candidate:
                    times.candidate[report.shape.name] = m.median_ms
                else:
                    times.baselines.setdefault(m.name, {})[report.shape.name] = m.median_ms
        return times

    def to_json(self, **extra: object) -> dict[str, object]:
        return {"op": self.op, "kernel": self.kernel, "device": self.device_name, **extra,
                "refused": {d: v.detail for d, v in self.refused}, "shapes": [r.to_json() for r in self.reports],
                "stages_s": {name: round(seconds, 3) for name, seconds in self.stages},
                "verifier_ahead": self.verifier_ahead}


def load_baselines(spec: OpSpec | Pipeline, names: Sequence[str] | None
                   ) -> tuple[list[tuple[str, Prepared]], list[tuple[str, str]]]:
    """The baselines of an op or a pipeline (`names`, or all), loaded; those that cannot load here, with why.

    A baseline that says it cannot run here (`BaselineUnavailable`: a package or the GPU missing) is reported as
    missing. Any other exception while loading one is an internal error: the bench cannot time the candidate
    against the baselines it was asked for, which says nothing about the candidate (on the H200, session 20,
    Triton's `@jit` once failed to read `triton_assign.py`'s source in a fresh worker and the candidate was
    recorded failed)."""
    from cake.experiments.workload import BaselineUnavailable

    chosen = [spec.baseline(n) for n in names] if names else list(spec.baselines)
    ready, missing = [], []
    for baseline in chosen:
        try:
            ready.append((baseline.name, baseline.load()))
        except BaselineUnavailable as why:
            missing.append((baseline.name, str(why)))
        except Exception as error:  # the boundary of loading a baseline's code (ours or a package's)
            raise InternalError(f"loading baseline {baseline.name}", error) from error
    return ready, missing


def bench_shape(spec: OpSpec, shape: Shape, candidates: Sequence[tuple[str, Callable[..., Any], Verification]],
                baselines: Sequence[tuple[str, Prepared]], clock: Clock, config: TimingConfig, device_spec: DeviceSpec,
                *, device: str = "cuda", seed: int = 0, pool: int | None = None,
                unavailable: Sequence[tuple[str, str]] = ()) -> ShapeReport:
    """Time `candidates` interleaved with `baselines` at `shape`; speedups are against the fastest baseline."""
    from cake.stats import speedup_over_best
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import (
        Contestant,
        input_set_bytes,
        make_inputs,
        measure,
        pool_size,
        spot_check,
        summarize,
    )

    contract = get_contract(spec.contract)
    dims, dtype = shape.dim_map, shape.torch_dtype
    n_sets = pool or pool_size(input_set_bytes(contract, dims, dtype), device_spec.l2_bytes)
    sets = [make_inputs(contract, dims, dtype, device, seed + i) for i in range(n_sets)]
    contestants = [Contestant(name, fn, verification=v) for name, fn, v in candidates]
    contestants += [Contestant(name, p.run, p.prepared, candidate=False) for name, p in baselines]
    samples = measure(contestants, sets, clock, spot_check(contract, dtype, dict(spec.spot_sample), seed), config)
    against, baseline_ms, problems = speedup_inputs(spec, samples, unavailable)
    measurements = []
    for s in samples:
        if not s.candidate:
            measurements.append(summarize(s, contract, dims, dtype, device_spec))
            continue
        speedup = speedup_over_best(s.median_ms if s.ok else None, baseline_ms, against,
                                    candidate_problem=s.failure, problems=problems)
        best = baseline_ms[speedup.best_baseline] if speedup.best_baseline else None
        m = summarize(s, contract, dims, dtype, device_spec, best)
        measurements.append(replace(m, extra={**m.extra, "speedup": speedup.to_json()}))
    return ShapeReport(shape, tuple(measurements), tuple(unavailable))


def speedup_inputs(spec: OpSpec, samples: Sequence[Samples], unavailable: Sequence[tuple[str, str]]
                   ) -> tuple[list[str], dict[str, float | None], dict[str, str]]:
    """(the baselines a speedup is over, their medians, why each one without a time has none). A workload's
    references are timed alongside but are not baselines; a baseline that could not load or failed its check
    stays among them without a time, so the speedup is undefined rather than over the others."""
    def is_reference(name: str) -> bool:
        try:
            return spec.baseline(name).reference
        except KeyError:
            return False

    against = [s.name for s in samples if not s.candidate and not is_reference(s.name)]
    against += [name for name, _ in unavailable if name not in against and not is_reference(name)
                and any(b.name == name for b in spec.baselines)]
    baseline_ms = {s.name: (s.median_ms if s.ok else None) for s in samples if not s.candidate}
    problems = {s.name: s.failure or "not timed" for s in samples if not s.candidate and not s.ok}
    problems.update({name: f"not available: {why}" for name, why in unavailable})
    return against, baseline_ms, problems


# How much of the first failing gate's reason a refusal carries: enough for a ptxas or CUDA error's first lines (a
# RUNTIME_ERROR's verdict is not cached, so the refusal is where an evolve run's store reads why it failed).
REFUSAL_REASON_CHARS = 600


def verdict_verification(verdict: Any) -> Verification:
    from cake.verifier.timing import Verification

    if verdict.passed:
        return Verification(True, "battery", f"{len(verdict.gates)} gates, none failed")
    failed = ", ".join(f"{g.gate_id} ({g.status.value})" for g in verdict.failures)
    first = verdict.failures[0]
    reason = " ".join(first.reason.split())[:REFUSAL_REASON_CHARS]
    return Verification(False, "battery", f"failed: {failed}" + (f"; {first.gate_id}: {reason}" if reason else ""))


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """What to bench: the kernel (a reference a fresh process can load), where and how."""

    op: str
    kernel: KernelRef
    shapes: tuple[Shape, ...]
    baselines: tuple[str, ...] | None = None  # None: every baseline of the op
    seed: int = 0
    gate_timeout_s: float = 600.0
    reps: int = 100
    max_seconds: float = 30.0
    use_cache: bool = True
    # Dtypes the kernel must also pass the gates in before it is timed (the evaluator's other declared dtypes),
    # verified in the same worker as the timed ones.
    gate_dtypes: tuple[str, ...] = ()
    # `TimingConfig.retire_ratio`: a baseline this many times slower than the fastest leaves the rotation after
    # `min_reps` (None: every baseline every rep, as `cake bench` tables want every baseline's full spread)
    retire_ratio: float | None = None

    @property
    def verified_dtypes(self) -> tuple[str, ...]:
        """Every dtype gated before timing, in order: the timed ones (sorted), then `gate_dtypes`."""
        timed = sorted({str(s.torch_dtype).removeprefix("torch.") for s in self.shapes})
        return tuple(dict.fromkeys([*timed, *self.gate_dtypes]))


def _bench_setup(request: BenchRequest) -> tuple[OpSpec, CudaClock, DeviceSpec]:
    """The op's workload spec, the device clock and the device's spec; BenchSetupError when one is missing."""
    import torch

    from cake.arch import match_device
    from cake.experiments.workload import UnknownWorkloadError, workload_for_op
    from cake.verifier.timing import CudaClock

    try:
        spec = workload_for_op(request.op).op(request.op)
    except UnknownWorkloadError as error:
        raise BenchSetupError(f"{error}; benching needs a workload with shapes and baselines for {request.op}") from None
    if not torch.cuda.is_available():
        raise BenchSetupError("no CUDA device here; timings are taken only on a GPU (nothing was timed)")
    clock = CudaClock()
    device_spec = clock.device_spec or match_device(clock.device_name)
    if device_spec is None:
        raise BenchSetupError(f"`{clock.device_name}` is not in cake.arch's device table; add it to judge its ceilings")
    return spec, clock, device_spec


def bench_kernel(request: BenchRequest, spare: Worker | None = None) -> BenchRun:
    """Verify `request.kernel` on the GPU at every dtype it is timed at and every one of `gate_dtypes`, in one
    verifier worker (cached verdicts count), and time it at each shape interleaved with the baselines; a kernel
    failing the gates at a dtype is refused, not timed (the dtypes after the first failing one are not gated).
    Raises BenchSetupError when it cannot start (no GPU, unknown device, unloadable kernel, no workload).

    The verifier worker is spawned before this process starts CUDA, its clock and the workload, so the worker's
    interpreter start and torch import overlap them (each of the two process starts cost about 5 s on the H200 host
    in session 21); the verification owns it from there (ended unused when every verdict is cached). `spare`: a
    verifier worker a bench server started before this request arrived (`cake.evaluation.bench_server`), used in
    place of a new one while it still runs."""
    from cake.verifier.worker import KernelLoadError, Worker, verify_dtypes_in_worker

    ahead = spare is not None and spare.alive()
    if spare is not None and not ahead:
        spare.abandon()
    started = spare.bind(request.kernel) if spare is not None and ahead else Worker(request.kernel, "cuda")
    with ExitStack() as until_handed_over:  # a setup that raises ends the spare; past it, verification owns it
        until_handed_over.callback(started.abandon)
        spec, clock, device_spec = _bench_setup(request)
        until_handed_over.pop_all()
    from cake.verifier.timing import TimingConfig
    from cake.verifier.worker_main import load_kernel

    described = request.kernel.describe()
    stages: list[tuple[str, float]] = []
    mark = time.monotonic()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        stages.append((name, now - mark))
        mark = now

    try:
        verdicts = verify_dtypes_in_worker(request.op, request.kernel, device="cuda", dtypes=request.verified_dtypes,
                                           seed=request.seed, all_gates=False, timeout_s=request.gate_timeout_s,
                                           use_cache=request.use_cache, started=started)
    except KernelLoadError as error:
        raise BenchSetupError(str(error)) from None
    verifications = {dtype: verdict_verification(verdict) for dtype, verdict in verdicts}
    lap("verify_" + "+".join(verifications))
    refused = tuple((d, v) for d, v in verifications.items() if not v.passed)
    if refused:
        return BenchRun(request.op, described, clock.device_name, refused=refused, stages=tuple(stages),
                        verifier_ahead=ahead)
    kernel = load_kernel(request.kernel)
    if isinstance(kernel, str):
        raise BenchSetupError(kernel)
    lap("load")
    baselines, missing = load_baselines(spec, request.baselines)
    lap("baselines")
    config = TimingConfig(max_reps=request.reps, min_reps=min(10, request.reps), max_wall_s=request.max_seconds,
                          retire_ratio=request.retire_ratio)
    reports = []
    for shape in request.shapes:
        reports.append(bench_shape(spec, shape, [("candidate", kernel,
                                                  verifications[str(shape.torch_dtype).removeprefix("torch.")])],
                                   baselines, clock, config, device_spec, seed=request.seed, unavailable=missing))
        lap(f"time_{shape.name}")
    return BenchRun(request.op, described, clock.device_name, tuple(reports), stages=tuple(stages),
                    verifier_ahead=ahead)


def request_to_json(request: BenchRequest) -> dict[str, object]:
    return {"op": request.op, "kernel": request.kernel.to_json(), "shapes": [s.to_json() for s in request.shapes],
            "baselines": None if request.baselines is None else list(request.baselines), "seed": request.seed,
            "gate_timeout_s": request.gate_timeout_s, "reps": request.reps, "max_seconds": request.max_seconds,
            "use_cache": request.use_cache, "gate_dtypes": list(request.gate_dtypes),
            "retire_ratio": request.retire_ratio}


def request_from_json(data: Mapping[str, Any]) -> BenchRequest:
    from cake.experiments.workload import Shape
    from cake.verifier.worker_protocol import KernelRef

    return BenchRequest(
        op=str(data["op"]), kernel=KernelRef.from_json(dict(data["kernel"])),
        shapes=tuple(Shape.from_json(s) for s in data["shapes"]),
        baselines=None if data["baselines"] is None else tuple(data["baselines"]), seed=int(data["seed"]),
        gate_timeout_s=float(data["gate_timeout_s"]), reps=int(data["reps"]), max_seconds=float(data["max_seconds"]),
        use_cache=bool(data["use_cache"]), gate_dtypes=tuple(str(d) for d in data["gate_dtypes"]),
        retire_ratio=None if data.get("retire_ratio") is None else float(data["retire_ratio"]))
