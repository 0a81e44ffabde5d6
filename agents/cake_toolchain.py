"""The real toolchain behind `cake evolve`: checker, cost model, and the evaluator the loop's executor runs.

* `validate`: parse, print canonically, check for the arch and backend (`cake.agents.validation`).
* `predict_ms`: `cake.ir.cost.predict` at the workload's fitness shape for the GPU that times the run (the arch's
  default device on the CPU: `cake.arch.ranking_device`), through its `Ranker` (which a stored run's replay builds
  from the run's config, so it ranks as the run did); `predict_many` the same for a turn's candidates, which
  on a GPU run of the CUDA backend first compiles them (nvcc, several at once, into the cubin cache the evaluation
  then reads) and prices the register spills ptxas reports where roles declare budgets: the static model sees none
  there, and ranked a consumer ptxas spilled 1.2 KB under (13-15 ms on the H200) at 1.8 ms, among the best.
* `evaluator`: a `cake.evaluation.evaluator.ScheduleEvaluator` — the contract gates in an isolated worker,
  then on a GPU the timing against the workload's baselines (measured fitness), on the CPU the cost
  model's predicted speedup over the seed schedule (model fitness; every output of the run says so).
  `evaluate` and `devices` make the toolchain itself usable as the evaluator of a local executor; `retime`
  times a new best again in a fresh bench worker (the figure a measured run reports as its best).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cake.agents.base import Checked
from cake.agents.validation import make_validator
from cake.ir import nodes as n
from cake.ir.checks.registry import CheckSpec
from cake.ir.parser import parse

from cake.arch import DeviceSpec, match_device, ranking_device
from cake.diagnostics import DiagnosticError
from cake.errors import InternalError, ShapeNotSupported
from cake.evaluation.evaluator import EvalSettings, ScheduleEvaluator
from cake.evaluation.protocol import EvalJob
from cake.runs.store import Evaluation, FitnessKind, Retime

if TYPE_CHECKING:
    from cake.experiments.workload import Shape
    from cake.ir.cost_timing import Allocation

__all__ = ["CakeToolchain", "EvalSettings", "Ranker"]

_DTYPES = {"fp32": n.DType.F32, "fp16": n.DType.F16, "bf16": n.DType.BF16}
# nvcc runs at once when a turn's candidates are compiled to be ranked (threads that wait on subprocesses)
RANK_COMPILE_WORKERS = max(1, (os.cpu_count() or 1) - 2)


def _gpu_name(device: str) -> str | None:
    """The CUDA name of the GPU a run on `device` times with (None on the CPU, or where CUDA has no device: such
    a run's evaluations then fail on their own, each with its verdict)."""
    if device != "cuda":
        return None
    import torch

    return str(torch.cuda.get_device_name()) if torch.cuda.is_available() else None


@dataclass(frozen=True, slots=True)
class Ranker:
    """What the loop ranks a turn's candidates by: the cost model at the workload's fitness shape, for `device`
    (`cake.arch.ranking_device`), through `backend`'s model, with the bench's clock's calibration; with
    `with_compiler` (a GPU run) each candidate is first compiled and priced with what the compiler reports: the
    CUDA backend's register spills (ptxas), the Triton backend's registers, spills and shared memory. A stored run
    is ranked again with `for_run`, as it ranked then (its device and backend), with today's model and
    calibration."""

    shape: Shape
    arch: str
    device: DeviceSpec
    device_reason: str
    backend: str
    with_compiler: bool

    @classmethod
    def for_run(cls, config: Mapping[str, Any], *, with_compiler: bool | None = None) -> Ranker:
        """The ranking a stored run's config describes: the GPU it recorded (a run on the CPU, or one stored before
        runs recorded their GPU, ranks for its arch's default device, and the reason says which); `with_compiler`
        None ranks as the run did."""
        from cake.experiments.workload import get_workload

        arch, backend = str(config["arch"]), str(config["eval"]["backend"])
        on_gpu = config["eval"].get("device") == "cuda"
        recorded = config.get("device") if on_gpu else None
        device, reason = ranking_device(arch, str(recorded) if recorded else None)
        if on_gpu and not recorded:
            reason = f"the run recorded no GPU: {arch}'s default device"
        elif recorded and match_device(str(recorded)) is device:
            reason = f"the GPU the run recorded ({recorded})"
        shape = get_workload(str(config["workload"])).fitness_shape(str(config["op"]))
        compiled = on_gpu if with_compiler is None else with_compiler
        return cls(shape, arch, device, reason, backend, compiled)

    def predict_ms(self, kernel: n.Kernel, spilled_regs: Mapping[str, float] | None = None,
                   allocations: Mapping[str, Allocation] | None = None) -> float | None:
        from cake.ir.cost import CostError, predict
        from cake.ir.cost_calibrations import BENCH_CLOCK

        try:
            # ranked for the bench that times the evaluations: a fit of its clock's timings where one exists
            prediction = predict(kernel, dims=self.shape.dim_map, dtype=_DTYPES[self.shape.dtype],
                                 arch_name=self.arch, device=self.device, backend=self.backend,
                                 spilled_regs=spilled_regs, allocations=allocations, clock=BENCH_CLOCK)
        except CostError:
            return None
        return prediction.time_ms

    def predict_many(self, kernels: Sequence[n.Kernel]) -> list[float | None]:
        if not self.with_compiler:
            return [self.predict_ms(k) for k in kernels]
        if self.backend == "triton":
            # one at a time: Triton's compiler is not documented safe to call from several threads at once
            return [self.predict_ms(k, allocations=self._compiled_allocations(k)) for k in kernels]
        with ThreadPoolExecutor(max_workers=RANK_COMPILE_WORKERS, thread_name_prefix="cake-rank-nvcc") as pool:
            spills = list(pool.map(self._compiled_spills, kernels))
        return [self.predict_ms(k, s) for k, s in zip(kernels, spills, strict=True)]

    # Either compile returns None when the candidate does not build: it is then ranked by the static model alone, so
    # a checked schedule that fails to compile still reaches its evaluation, which records the failure located (or,
    # for a bug in a generator, as an internal error) where the distiller and the report see it; ranking it last
    # would hide the checker's gap.

    def _compiled_spills(self, kernel: n.Kernel) -> dict[str, float] | None:
        """The register spills ptxas reports for each launch (CUDA backend)."""
        from cake.lowering.cuda.backend import compiled_spills

        try:
            return compiled_spills(kernel, self.arch, self.shape.dim_map, _DTYPES[self.shape.dtype])
        except (DiagnosticError, ShapeNotSupported, InternalError):
            return None

    def _compiled_allocations(self, kernel: n.Kernel) -> dict[str, Allocation] | None:
        """The registers, spills and shared memory Triton allocates for each launch (Triton backend)."""
        from cake.lowering.triton.allocations import NotCompiled, compiled_allocations

        try:
            return compiled_allocations(kernel, self.arch, self.shape.dim_map, _DTYPES[self.shape.dtype])
        except (DiagnosticError, ShapeNotSupported, InternalError, NotCompiled):
            return None


class CakeToolchain:
    def __init__(self, *, workload: str, op: str, arch: str, settings: EvalSettings, seeds: Sequence[Path],
                 rules: Callable[[], Sequence[CheckSpec]] | None = None, against: Sequence[str] | None = None):
        from cake.experiments.workload import get_workload

        self.workload = get_workload(workload)
        self.spec = self.workload.op(op)
        self.op = op
        self.arch = arch
        self.backend = settings.backend
        self.settings = settings
        self.fitness_kind = FitnessKind.MEASURED if settings.device == "cuda" else FitnessKind.MODEL
        # The baselines a measured fitness is over: the workload's, or the subset a run named (`--against`).
        self.against = self.workload.fitness_for(op).over(against).against
        self.shape = self.workload.fitness_shape(op)
        rank_device, rank_reason = ranking_device(arch, _gpu_name(settings.device))
        # a GPU run compiles its candidates to rank them (its compiler is there, the one that builds what the bench
        # times, and the evaluation compiles the same specialization anyway)
        self.ranker = Ranker(self.shape, arch, rank_device, rank_reason, settings.backend,
                             with_compiler=settings.device == "cuda")
        # rules: the learned ones (distiller); dims: budgets are proven at the fitness shape
        self._validate = make_validator(arch, settings.backend, rules, dims=self.shape.dim_map)
        self.model_baseline_ms = self._model_baseline(seeds)
        # The backend and arch travel in each kernel reference (KernelSpec), not in the environment.
        self.evaluator = ScheduleEvaluator(op=op, workload=self.workload.name, arch=arch,
                                           settings=settings, model_baseline_ms=self.model_baseline_ms,
                                           against=self.against)

    @property
    def rank_device(self) -> DeviceSpec:
        return self.ranker.device

    # ------------------------------------------------------------------------------------ static

    def validate(self, text: str) -> Checked:
        return self._validate(text)

    def predict_ms(self, kernel: n.Kernel, spilled_regs: Mapping[str, float] | None = None) -> float | None:
        return self.ranker.predict_ms(kernel, spilled_regs)

    @property
    def ranks_with_compiler(self) -> bool:
        """Whether `predict_many` compiles candidates to read their spills (`Ranker.with_compiler`)."""
        return self.ranker.with_compiler

    def predict_many(self, kernels: Sequence[n.Kernel]) -> list[float | None]:
        return self.ranker.predict_many(kernels)

    def _model_baseline(self, seeds: Sequence[Path]) -> float | None:
        times = [t for t in (self.predict_ms(parse(p.read_text(), p.name)) for p in seeds) if t is not None]
        return min(times) if times else None

    def describe(self) -> str:
        if self.fitness_kind is FitnessKind.MODEL:
            return (f"No GPU: candidates are verified under Triton's CPU interpreter at the contract's small shapes "
                    f"(fp32); fitness is the COST MODEL's predicted speedup over the seed schedule at "
                    f"{self.shape.name} ({self.shape.describe()}) on {self.arch} — a model prediction, not a timing "
                    f"(fitness_kind=model).")
        shapes = self.evaluator.timed_shapes
        where = shapes[0] if len(shapes) == 1 else f"{', '.join(shapes)} (the geomean over them)"
        return (f"GPU: candidates are verified by the contract gates on {self.settings.device}, then timed at "
                f"{where} interleaved with {', '.join(self.against)}{self._narrowed_note()}; fitness is the "
                f"measured speedup over the best of them (fitness_kind=measured). Candidates are ranked by the cost "
                f"model for {self.ranker.device.name} ({self.ranker.device_reason}).")

    def _narrowed_note(self) -> str:
        left_out = [b for b in self.workload.fitness_for(self.op).against if b not in self.against]
        return f" (not {', '.join(left_out)}: the run was told --against)" if left_out else ""

    # ------------------------------------------------------------------------------------ evaluation

    def devices(self) -> tuple[str, ...]:
        """One executor slot per GPU, or `cpu_workers` interpreter slots on a CPU-only machine."""
        if self.settings.device == "cpu":
            return ("cpu",) * max(1, self.settings.cpu_workers)
        import torch

        count = torch.cuda.device_count()
        return tuple(f"cuda:{i}" for i in range(count)) or ("cuda",)

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        return self.evaluator.evaluate(job, device)

    def confirm(self, job: EvalJob, device: str, evaluation: Evaluation) -> Evaluation:
        return self.evaluator.confirm(job, device, evaluation)

    def retime(self, job: EvalJob, device: str) -> Retime:
        """A new best timed again in a fresh bench worker on `device` (makes the toolchain a `Retimer`)."""
        return self.evaluator.retime(job, device)
