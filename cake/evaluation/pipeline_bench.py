"""Benching a pipeline (`cake bench --pipeline lloyd_iteration`): each step's kernel through the gates, a whole
run checked against the workload's fp64 reference pipeline, then the composed pipeline timed interleaved with
the pipeline's baselines.

Order, and what stops what:

1. **Gates.** Every step's kernel runs the contract battery (isolated worker; a cached verdict counts) in
   every dtype the shapes use, on the device the bench runs on. A kernel failing at a dtype is *refused*:
   nothing is checked or timed, and the run says which step failed which gates.
2. **Whole-run check** (`Pipeline.check`, e.g. the fp64 Lloyd): at each shape on the leading slices of the
   first timing input set (`Pipeline.check_sample`), `Pipeline.iterations` iterations. A failure is reported
   and that shape is not timed.
3. **Timing** (GPU only): `cake.verifier.timing.measure` — the composed pipeline and every baseline
   interleaved in a seeded shuffled order per rep, cold L2, rotated inputs, `Pipeline.output_check` before
   and after timing. Per-iteration time = call time / `Pipeline.iterations`; the speedup is over the best of
   the baselines, undefined (with the reason) when one is missing or failed. On a CPU nothing is timed:
   the gates and the check run (Triton under its interpreter), and the run says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cake.evaluation.bench import BenchSetupError, load_baselines, verdict_verification

if TYPE_CHECKING:
    from cake.arch import DeviceSpec
    from cake.experiments.workload import Pipeline, PipelineCheck, Shape
    from cake.stats import Speedup
    from cake.verifier.timing import Clock, Measurement, TimingConfig, Verification
    from cake.verifier.worker_protocol import KernelRef

CANDIDATE = "ours"
NO_GPU_TIMING = "no CUDA device: the gates and the whole-run check ran; timings are taken only on a GPU"


# ---- naming each step's kernel --------------------------------------------------------------------------------

def parse_step(text: str) -> tuple[str, str]:
    """`OP=SOURCE` -> (op, source)."""
    op, eq, source = text.partition("=")
    if not eq or not op.strip() or not source.strip():
        raise BenchSetupError(f"--step {text!r} is not of the form OP=FILE.cake[@BACKEND] or OP=PATH.py:FUNC")
    return op.strip(), source.strip()


def step_ref(op: str, source: str, base: Path) -> KernelRef:
    """The kernel reference a step source names: `FILE.cake[@triton|@cuda]` (a schedule, lowered by that
    backend; default the loader's) or `PATH.py:FUNC` (a callable taking the op's inputs). A relative path is
    resolved against `base`."""
    from cake.experiments.workload import schedule_loader_for
    from cake.lowering.runtime import SCHEDULE_LOADER
    from cake.verifier.worker_protocol import KernelRef, KernelRefError

    path_text, _, backend = source.partition("@") if ".cake@" in source else (source, "", "")
    if path_text.endswith(".cake"):
        if backend and backend not in ("triton", "cuda"):
            raise BenchSetupError(f"step {op}={source}: unknown backend {backend!r}; use @triton or @cuda")
        path = Path(path_text).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise BenchSetupError(f"step {op}: schedule {path} does not exist")
        return KernelRef.loader(schedule_loader_for(op) or SCHEDULE_LOADER, str(path),
                                {"backend": backend} if backend else None)
    file_text, colon, func = source.rpartition(":")
    if colon and not Path(file_text).expanduser().is_absolute():
        source = f"{base / file_text}:{func}"
    try:
        return KernelRef.parse(source)
    except KernelRefError as error:
        raise BenchSetupError(f"step {op}: {error}") from None


def resolve_steps(pipeline: Pipeline, given: Sequence[str], cwd: Path) -> tuple[tuple[str, KernelRef], ...]:
    """One kernel per step: those named by `--step OP=SOURCE` (relative to `cwd`), else the pipeline's
    default (relative to its workload folder). A missing default stops with what to pass instead."""
    named: dict[str, KernelRef] = {}
    for text in given:
        op, source = parse_step(text)
        if op not in pipeline.steps:
            raise BenchSetupError(f"--step {text!r}: {op!r} is not a step of {pipeline.name} "
                                  f"(steps: {', '.join(pipeline.steps)})")
        if op in named:
            raise BenchSetupError(f"--step names {op} twice")
        named[op] = step_ref(op, source, cwd)
    defaults = dict(pipeline.default_steps)
    steps = []
    for op in pipeline.steps:
        if op in named:
            steps.append((op, named[op]))
            continue
        if op not in defaults:
            raise BenchSetupError(f"{pipeline.name} has no default kernel for step {op}; name one with "
                                  f"--step {op}=FILE.cake or --step {op}=PATH.py:FUNC")
        try:
            steps.append((op, step_ref(op, defaults[op], pipeline.folder)))
        except BenchSetupError as error:
            raise BenchSetupError(f"{error} (the default for {pipeline.name}: {defaults[op]}); name the kernel "
                                  f"with --step {op}=FILE.cake[@BACKEND] or --step {op}=PATH.py:FUNC") from None
    return tuple(steps)


# ---- results -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PipelineShape:
    """One shape: the whole-run check, and (when timed) every contestant's measurement of a whole call, the
    per-iteration medians and the speedup over the best baseline. `not_timed` says why nothing was timed."""

    shape: Shape
    check: dict[str, object]
    check_ok: bool
    measurements: tuple[Measurement, ...] = ()
    per_iteration_ms: dict[str, float | None] | None = None
    speedup: Speedup | None = None
    unavailable: tuple[tuple[str, str], ...] = ()
    not_timed: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"shape": self.shape.to_json(), "check": self.check, "not_timed": self.not_timed,
                "ms_per_iteration": self.per_iteration_ms,
                "speedup": None if self.speedup is None else self.speedup.to_json(),
                "measurements": [m.to_json() for m in self.measurements], "unavailable": dict(self.unavailable)}


@dataclass(frozen=True, slots=True)
class PipelineRun:
    pipeline: str
    iterations: int
    steps: tuple[tuple[str, str], ...]  # (op, the kernel described)
    device: str
    verifications: tuple[tuple[str, str, Verification], ...]  # (op, dtype, verification)
    shapes: tuple[PipelineShape, ...] = ()

    @property
    def refused(self) -> tuple[tuple[str, str, Verification], ...]:
        return tuple(v for v in self.verifications if not v[2].passed)

    @property
    def all_timed(self) -> bool:
        """Every shape checked, timed and plausible (and nothing refused)."""
        def fine(s: PipelineShape) -> bool:
            ours = next((m for m in s.measurements if m.candidate), None)
            return s.check_ok and ours is not None and ours.failure is None and not ours.implausible
        return not self.refused and bool(self.shapes) and all(fine(s) for s in self.shapes)

    @property
    def all_checked(self) -> bool:
        return not self.refused and bool(self.shapes) and all(s.check_ok for s in self.shapes)

    def to_json(self, **extra: object) -> dict[str, object]:
        return {"pipeline": self.pipeline, "iterations": self.iterations, "device": self.device, **extra,
                "steps": dict(self.steps),
                "verifications": [{"op": op, "dtype": d, "passed": v.passed, "source": v.source, "detail": v.detail}
                                  for op, d, v in self.verifications],
                "shapes": [s.to_json() for s in self.shapes]}


@dataclass(frozen=True, slots=True)
class PipelineRequest:
    pipeline: str
    steps: tuple[tuple[str, KernelRef], ...]
    shapes: tuple[Shape, ...]
    baselines: tuple[str, ...] | None = None  # None: every baseline of the pipeline
    seed: int = 0
    gate_timeout_s: float = 600.0
    reps: int = 100
    max_seconds: float = 30.0
    use_cache: bool = True


# ---- the stages ----------------------------------------------------------------------------------------------------

def verify_steps(request: PipelineRequest, device: str) -> tuple[tuple[str, str, Verification], ...]:
    """Each step's kernel through the gates in every dtype the shapes use (cached verdicts count)."""
    from cake.verifier.worker import KernelLoadError, verify_in_worker

    dtypes = sorted({str(s.torch_dtype).removeprefix("torch.") for s in request.shapes})
    out = []
    for op, ref in request.steps:
        for dtype in dtypes:
            try:
                verdict = verify_in_worker(op, ref, device=device, dtypes=[dtype], seed=request.seed, all_gates=False,
                                           timeout_s=request.gate_timeout_s, use_cache=request.use_cache)
            except KernelLoadError as error:
                raise BenchSetupError(f"step {op}: {error}") from None
            out.append((op, dtype, verdict_verification(verdict)))
    return tuple(out)


def load_steps(steps: Sequence[tuple[str, KernelRef]]) -> dict[str, Callable[..., Any]]:
    from cake.verifier.worker_main import load_kernel

    kernels = {}
    for op, ref in steps:
        kernel = load_kernel(ref)
        if isinstance(kernel, str):
            raise BenchSetupError(f"step {op}: {kernel}")
        kernels[op] = kernel
    return kernels


def sample_inputs(pipeline: Pipeline, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The leading `count` indices along each dim of `Pipeline.check_sample` of every input that has it."""
    from cake.verifier.registry import get_contract

    specs = get_contract(pipeline.inputs_from).inputs
    sample = dict(pipeline.check_sample)
    out = []
    for spec, tensor in zip(specs, inputs, strict=True):
        for axis, dim in enumerate(spec.dims):
            if tensor is not None and dim in sample:
                tensor = tensor.narrow(axis, 0, min(sample[dim], tensor.shape[axis]))
        out.append(tensor)
    return tuple(out)


def whole_run_check(pipeline: Pipeline, kernels: Mapping[str, Callable[..., Any]],
                    inputs: tuple[Any, ...]) -> PipelineCheck | None:
    if pipeline.check is None:
        return None
    return pipeline.check(kernels, sample_inputs(pipeline, inputs), pipeline.iterations)


def _no_output_check(inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> str | None:
    return None


def time_shape(pipeline: Pipeline, shape: Shape, kernels: Mapping[str, Callable[..., Any]], verification: Verification,
               baselines: Sequence[tuple[str, Any]], unavailable: Sequence[tuple[str, str]],
               input_sets: Sequence[tuple[Any, ...]], clock: Clock, config: TimingConfig,
               device_spec: DeviceSpec) -> tuple[tuple[Measurement, ...], dict[str, float | None], Speedup]:
    """The composed pipeline and `baselines` interleaved (module docstring, stage 3)."""
    from cake.stats import speedup_over_best
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import Contestant, measure, summarize

    contract = get_contract(pipeline.inputs_from)
    contestants = [Contestant(CANDIDATE, pipeline.compose(kernels), verification=verification)]
    contestants += [Contestant(name, p.run, p.prepared, candidate=False) for name, p in baselines]
    samples = measure(contestants, input_sets, clock, pipeline.output_check or _no_output_check, config)
    per_iteration = {s.name: (s.median_ms / pipeline.iterations if s.ok else None) for s in samples}
    against = [name for name, _ in baselines] + [name for name, _ in unavailable]
    problems = {s.name: s.failure or "not timed" for s in samples if not s.ok}
    problems.update({name: f"not available: {why}" for name, why in unavailable})
    ours = samples[0]
    speedup = speedup_over_best(per_iteration[CANDIDATE], {k: v for k, v in per_iteration.items() if k != CANDIDATE},
                                against, candidate_problem=ours.failure, problems=problems)
    best = None if speedup.best_baseline is None else next(s.median_ms for s in samples if s.name == speedup.best_baseline)
    dims, dtype = shape.dim_map, shape.torch_dtype
    measurements = tuple(summarize(s, contract, dims, dtype, device_spec, best if s.candidate else None,
                                   work_scale=pipeline.iterations) for s in samples)
    measurements = tuple(replace(m, extra={**m.extra, "ms_per_iteration": per_iteration[m.name]}) for m in measurements)
    return measurements, per_iteration, speedup


def bench_pipeline(request: PipelineRequest, device: str) -> PipelineRun:
    """Gates, whole-run check, then (on "cuda") timing, at every shape of `request` (module docstring).
    Raises BenchSetupError when it cannot start (unknown pipeline or device, a kernel that does not load)."""
    import torch

    from cake.experiments.workload import UnknownWorkloadError, get_pipeline
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import (
        CudaClock,
        TimingConfig,
        Verification,
        input_set_bytes,
        make_inputs,
        match_device,
        pool_size,
    )

    try:
        _, pipeline = get_pipeline(request.pipeline)
    except UnknownWorkloadError as error:
        raise BenchSetupError(str(error)) from None
    clock, device_spec, device_name = None, None, "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise BenchSetupError("no CUDA device here; timings are taken only on a GPU (nothing was timed)")
        clock = CudaClock()
        device_spec = clock.device_spec or match_device(clock.device_name)
        if device_spec is None:
            raise BenchSetupError(f"`{clock.device_name}` is not in cake.arch's device table; add it to judge its ceilings")
        device_name = clock.device_name
    described = tuple((op, ref.describe()) for op, ref in request.steps)
    verifications = verify_steps(request, device)
    run = PipelineRun(pipeline.name, pipeline.iterations, described, device_name, verifications)
    if run.refused:
        return run
    kernels = load_steps(request.steps)
    baselines, missing = load_baselines(pipeline, request.baselines) if clock is not None else ([], [])
    contract = get_contract(pipeline.inputs_from)
    shapes = []
    for shape in request.shapes:
        dims, dtype = shape.dim_map, shape.torch_dtype
        n_sets = 1 if device_spec is None else pool_size(input_set_bytes(contract, dims, dtype), device_spec.l2_bytes)
        sets = [make_inputs(contract, dims, dtype, device, request.seed + i) for i in range(n_sets)]
        check = whole_run_check(pipeline, kernels, sets[0])
        check_json: dict[str, object] = {"ok": None, "summary": "the pipeline declares no whole-run check"} \
            if check is None else check.to_json()
        check_ok = check is None or check.ok
        if not check_ok:
            shapes.append(PipelineShape(shape, check_json, False, not_timed="failed the whole-run check"))
            continue
        if clock is None or device_spec is None:
            shapes.append(PipelineShape(shape, check_json, True, not_timed=NO_GPU_TIMING))
            continue
        dtype_name = str(dtype).removeprefix("torch.")
        details = "; ".join(f"{op}: {v.detail}" for op, d, v in verifications if d == dtype_name)
        verification = Verification(True, "battery", details)
        config = TimingConfig(max_reps=request.reps, min_reps=min(10, request.reps), max_wall_s=request.max_seconds,
                              shuffle_seed=request.seed)
        measurements, per_iteration, speedup = time_shape(pipeline, shape, kernels, verification, baselines, missing,
                                                          sets, clock, config, device_spec)
        shapes.append(PipelineShape(shape, check_json, True, measurements, per_iteration, speedup, tuple(missing)))
        del sets
        torch.cuda.empty_cache()
    return replace(run, shapes=tuple(shapes))
