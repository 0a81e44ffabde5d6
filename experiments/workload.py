"""Workloads: what `cake evolve --op NAME` evolves, at which shapes, against what, and how it is scored.

A `Workload` binds op contracts (its own, registered with the verifier through `contracts`) to everything an experiment needs:

* `ops`: one `OpSpec` per kernel — its **seed** schedules (what a clean-start search begins from), its
  **reference** schedules (strong hand-written ones, kept for comparison and never used to seed a clean
  start), a tiny CPU shape (Triton interpreter), the GPU shape domain, and the baselines;
* `pipelines`: end-to-end compositions of the ops (the Lloyd iteration = assign + update);
* `fitness`: how a verified candidate's timings become one number.

Workloads are found through the `cake.workloads` entry points (see README.md). Look one up with
`get_workload(name)` (or `workload_for_op(op)`); nothing heavy is imported until a
baseline is loaded. Baselines import their packages lazily and raise `BaselineUnavailable` with an install
hint when the package is missing, so a table can say "not installed" instead of crashing.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cake.stats import Speedup

from cake.verifier.registry import ENTRY_POINT_GROUP, WorkloadContracts

DTYPE_NAMES: tuple[str, ...] = ("fp32", "fp16", "bf16")
_TORCH_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


_IR_DTYPE_NAMES = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}


@dataclass(frozen=True, slots=True)
class Shape:
    """One point of a shape domain: named sizes for the contract's dims, and the element dtype."""

    name: str
    dims: tuple[tuple[str, int], ...]
    dtype: str  # fp32 | fp16 | bf16
    note: str = ""

    @staticmethod
    def of(name: str, dtype: str, note: str = "", **dims: int) -> Shape:
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"shape {name}: unknown dtype {dtype!r}; use one of {DTYPE_NAMES}")
        return Shape(name, tuple(dims.items()), dtype, note)

    @property
    def dim_map(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def ir_dtype(self) -> str:
        """The dtype as the IR spells it (`cake.ir.nodes.DType` values: f32, f16, bf16)."""
        return _IR_DTYPE_NAMES[self.dtype]

    @property
    def torch_dtype(self) -> Any:
        import torch

        return getattr(torch, _TORCH_DTYPE[self.dtype])

    def describe(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims) + f" {self.dtype}"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "dims": self.dim_map, "dtype": self.dtype, "note": self.note}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Shape:
        return Shape.of(str(data["name"]), str(data["dtype"]), str(data.get("note", "")),
                        **{str(k): int(v) for k, v in dict(data["dims"]).items()})


def parse_shape(text: str, domain: Sequence[Shape], default_dtype: str) -> Shape:
    """A shape named in `domain` (`cake_cell`), or explicit sizes `B=32,N=65536,K=1024,D=128[:bf16]`."""
    for shape in domain:
        if shape.name == text:
            return shape
    sizes, _, dtype = text.partition(":")
    dims: dict[str, int] = {}
    for item in sizes.split(","):
        name, eq, value = item.partition("=")
        if not eq or not name.strip().isidentifier() or not value.strip().isdigit():
            known = ", ".join(s.name for s in domain)
            raise ValueError(f"shape {text!r} is neither a known shape ({known}) nor of the form B=32,N=1024,...")
        dims[name.strip()] = int(value)
    return Shape.of(text, dtype or default_dtype, "", **dims)


class BaselineUnavailable(Exception):
    """A baseline cannot run here (its package is missing, or it needs a GPU); the message says why and how
    to fix it. Reported as a status in tables, never as a time."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A kernel split in two: `prepare(*inputs)` runs once per input set, outside the timed region
    (e.g. flash-kmeans' precomputed norms); `run(*prepared)` is what the protocol times and returns the
    contract's outputs."""

    run: Callable[..., Any]
    prepare: Callable[..., tuple[Any, ...]] | None = None

    def prepared(self, *inputs: Any) -> tuple[Any, ...]:
        return tuple(inputs) if self.prepare is None else self.prepare(*inputs)


@dataclass(frozen=True, slots=True)
class Baseline:
    """A competitor for one op (or pipeline). `load()` imports lazily and returns a `Prepared` kernel."""

    name: str
    description: str
    load: Callable[[], Prepared]
    package: str | None = None  # the pip requirement, e.g. "flash-kmeans==0.3.1"; None for torch
    # A CAKE reference timed alongside (e.g. the IR seed lowered by CAKE's own emitter): shown, never one of
    # the baselines a speedup is over.
    reference: bool = False

    def status(self) -> str:
        """'available', or the reason it is not (without running anything on a device)."""
        try:
            self.load()
        except BaselineUnavailable as missing:
            return str(missing)
        return "available"


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One kernel of a workload, bound to its verifier contract by name."""

    contract: str
    seeds: tuple[str, ...]  # file names in the workload's folder: clean-start seeds
    references: tuple[str, ...]  # strong hand-written schedules: comparison only, never seeds
    cpu_shape: Shape
    gpu_shapes: tuple[Shape, ...]
    baselines: tuple[Baseline, ...]
    # Dims along which outputs are independent, with how many indices a spot check samples: the re-check
    # at a large shape compares a sample to the fp64 reference instead of the whole output.
    spot_sample: tuple[tuple[str, int], ...] = ()
    folder: Path = field(default=Path("."))
    # "module:function" loading this op's schedules as contract callables, when the lowering's own loader
    # cannot (e.g. optional inputs a schedule cannot take); None: cake.lowering.runtime:load_schedule.
    schedule_loader: str | None = None
    # "module:function" reading a per-shape choice table of this op (JSON naming "op") into `ChoiceConfig`s:
    # which schedule and params each of the op's declared GPU shapes runs (`cake export TABLE.json`); None: no
    # such table.
    choice_loader: str | None = None

    def seed_paths(self) -> tuple[Path, ...]:
        return tuple(self.folder / name for name in self.seeds)

    def reference_paths(self) -> tuple[Path, ...]:
        return tuple(self.folder / name for name in self.references)

    def shape(self, name: str) -> Shape:
        for shape in (self.cpu_shape, *self.gpu_shapes):
            if shape.name == name:
                return shape
        raise KeyError(f"{self.contract} has no shape {name!r}; known: {', '.join(s.name for s in self.gpu_shapes)}")

    def baseline(self, name: str) -> Baseline:
        for baseline in self.baselines:
            if baseline.name == name:
                return baseline
        known = ", ".join(b.name for b in self.baselines)
        raise KeyError(f"{self.contract} has no baseline {name!r}; known: {known}")


@dataclass(frozen=True, slots=True)
class ChoiceConfig:
    """One configuration of an op's per-shape choice table, and the declared GPU shapes the table sends to it."""

    schedule: Path
    params: tuple[tuple[str, int], ...]
    serves: tuple[str, ...]  # names of the op's gpu_shapes


class PipelineCheck(Protocol):
    """What a pipeline's whole-run check returns (e.g. kmeans' `LloydCheck`)."""

    @property
    def ok(self) -> bool: ...

    def summary(self) -> str: ...

    def to_json(self) -> dict[str, object]: ...


@dataclass(frozen=True, slots=True)
class Pipeline:
    """An end-to-end composition of ops, timed as a whole against a library's own loop.

    `compose(kernels)` takes one callable per step (keyed by contract name, each taking that contract's
    inputs) and returns `run(*inputs)` doing `iterations` steps of the pipeline; its per-iteration time is
    the measured time divided by `iterations`. Inputs come from the contract named `inputs_from`.

    `check(kernels, inputs, iterations)` judges a whole run against the workload's fp64 reference pipeline
    (`cake bench --pipeline` runs it before timing, on the inputs sampled along `check_sample`: dim -> how
    many leading indices, dims along which the pipeline is independent); `output_check(inputs, outputs)`
    is the timing protocol's cheap check before and after timing. `default_steps` name each step's kernel
    when the user names none: `FILE.cake[@BACKEND]` or `FILE.py:FUNC`, relative to `folder`.
    """

    name: str
    description: str
    steps: tuple[str, ...]
    inputs_from: str
    iterations: int
    compose: Callable[[Mapping[str, Callable[..., Any]]], Callable[..., Any]]
    baselines: tuple[Baseline, ...]
    check: Callable[[Mapping[str, Callable[..., Any]], tuple[Any, ...], int], PipelineCheck] | None = None
    check_sample: tuple[tuple[str, int], ...] = ()
    output_check: Callable[[tuple[Any, ...], tuple[Any, ...]], str | None] | None = None
    default_steps: tuple[tuple[str, str], ...] = ()
    folder: Path = field(default=Path("."))

    def baseline(self, name: str) -> Baseline:
        for baseline in self.baselines:
            if baseline.name == name:
                return baseline
        known = ", ".join(b.name for b in self.baselines)
        raise KeyError(f"pipeline {self.name} has no baseline {name!r}; known: {known}")


@dataclass(frozen=True, slots=True)
class Fitness:
    """How `cake evolve` scores a candidate for `op`.

    At each shape in `shapes`, the candidate and every baseline in `against` are timed interleaved by
    `cake.verifier.timing` (cold L2, rotated inputs, medians). The score is the geometric mean over the
    shapes of (fastest baseline's median) / (candidate's median): > 1 beats the best baseline. Every
    baseline in `against` must have a time at every shape: one that is missing or failed its check makes the
    speedup undefined (`speedup` says why) and the score None — never a speedup over the ones that ran.
    A candidate that has not passed the contract gates, or fails the re-check after timing, has no score
    (None) — it is never ranked, not ranked last. A run scores against fewer baselines only when asked by
    name (`narrowed`, `cake evolve --against`), and its config says so.
    """

    op: str
    shapes: tuple[str, ...]
    against: tuple[str, ...]

    def narrowed(self, names: Sequence[str]) -> Fitness:
        """The same fitness over `names` only, a non-empty subset of `against` (kept in `against`'s order);
        ValueError names what is not one of them."""
        unknown = [name for name in names if name not in self.against]
        if unknown or not names:
            raise ValueError(f"the fitness of {self.op} is measured against {', '.join(self.against)}; "
                             f"{'not one of them: ' + ', '.join(unknown) if unknown else 'name at least one'}")
        return Fitness(self.op, self.shapes, tuple(b for b in self.against if b in names))

    def over(self, names: Sequence[str] | None) -> Fitness:
        """`narrowed(names)`, or this fitness when a run named no baselines (None or empty: all of them)."""
        return self.narrowed(names) if names else self

    def speedup(self, candidate_ms: Mapping[str, float], baseline_ms: Mapping[str, Mapping[str, float]],
                problems: Mapping[str, str] | None = None) -> Speedup:
        """`candidate_ms[shape]` and `baseline_ms[baseline][shape]` are medians; `problems[name]` says why a
        contestant has no time (it then appears in the undefined speedup's reason)."""
        from cake.stats import Speedup, geomean, speedup_over_best

        if not self.shapes:
            return Speedup.missing(self.against, "the fitness names no shapes")
        per_shape = [speedup_over_best(candidate_ms.get(shape), {b: baseline_ms.get(b, {}).get(shape) for b in self.against},
                                       self.against, candidate_problem=(problems or {}).get("candidate"),
                                       problems=problems)
                     for shape in self.shapes]
        for shape, s in zip(self.shapes, per_shape, strict=True):
            if s.value is None:
                return Speedup.missing(self.against, f"at {shape}: {s.undefined}")
        values = [s.value for s in per_shape if s.value is not None]
        best = per_shape[0].best_baseline if len(per_shape) == 1 else "best per shape"
        return Speedup(geomean(values), tuple(self.against), best)

    def score(self, candidate_ms: Mapping[str, float], baseline_ms: Mapping[str, Mapping[str, float]]) -> float | None:
        """The speedup's value; None when it is undefined (a baseline or the candidate has no time)."""
        return self.speedup(candidate_ms, baseline_ms).value


@dataclass(frozen=True, slots=True)
class Workload:
    """An evolvable workload. `contracts` is what it contributes to the verifier: a `cake.workloads` entry
    point naming this object registers both (the verifier reads `contracts`, `cake evolve` the rest)."""

    name: str
    description: str
    ops: tuple[OpSpec, ...]
    fitness: Fitness
    contracts: WorkloadContracts
    pipelines: tuple[Pipeline, ...] = ()

    def __post_init__(self) -> None:
        registered = {c.name for c in self.contracts.contracts}
        unbound = [spec.contract for spec in self.ops if spec.contract not in registered]
        if unbound or self.contracts.name != self.name:
            raise ValueError(f"workload {self.name!r}: ops {unbound} have no contract in its WorkloadContracts "
                             f"{self.contracts.name!r}; the names must match and every op needs its contract")

    def op(self, contract: str) -> OpSpec:
        for spec in self.ops:
            if spec.contract == contract:
                return spec
        raise KeyError(f"workload {self.name} has no op {contract!r}; ops: {', '.join(o.contract for o in self.ops)}")

    def fitness_for(self, contract: str) -> Fitness:
        """How a run evolving `contract` is scored: the declared fitness for the fitness op (at the op's first GPU
        shape if it names none); for another op, the speedup over every baseline that op declares at its first
        GPU shape (`against` empty when it declares none: it has no measured fitness, and a GPU run of it refuses
        to start)."""
        spec = self.op(contract)
        first = (spec.gpu_shapes[0].name,)
        if contract == self.fitness.op:
            return self.fitness if self.fitness.shapes else replace(self.fitness, shapes=first)
        return Fitness(contract, first, tuple(b.name for b in spec.baselines))

    def unavailable_fitness_baselines(self, contract: str, against: Sequence[str]) -> list[tuple[str, str]]:
        """Each of `contract`'s baselines `against` that cannot run on this host, with why (loads them: on a GPU
        host it imports their packages, runs nothing)."""
        spec = self.op(contract)
        statuses = [(name, spec.baseline(name).status()) for name in against]
        return [(name, status) for name, status in statuses if status != "available"]

    def fitness_shapes(self, contract: str) -> tuple[Shape, ...]:
        """The shapes a measured fitness of `contract` is timed at: every shape the fitness names for the fitness
        op (its score is the geomean over them), else the op's first GPU shape."""
        spec = self.op(contract)
        return tuple(spec.shape(name) for name in self.fitness_for(contract).shapes)

    def fitness_shape(self, contract: str) -> Shape:
        """The first of `fitness_shapes`: where the cost model predicts, budgets are proven and a candidate's
        `measured_ms` is reported."""
        return self.fitness_shapes(contract)[0]

    @property
    def primary(self) -> OpSpec:
        """The op `cake evolve --op <workload>` evolves by default (the one fitness is defined on)."""
        return self.op(self.fitness.op)

    def seed_schedules(self) -> dict[str, tuple[Path, ...]]:
        """Clean-start seeds per op. Reference schedules are deliberately not here."""
        return {spec.contract: spec.seed_paths() for spec in self.ops}


class UnknownWorkloadError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def _workloads() -> dict[str, Workload]:
    """Every installed evolvable workload: the `cake.workloads` entry points that name a `Workload` (those
    naming only a WorkloadContracts are verifiable, not evolvable)."""
    found = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        loaded = entry_point.load()
        if isinstance(loaded, Workload):
            found[entry_point.name] = loaded
    return found


def workload_names() -> tuple[str, ...]:
    return tuple(sorted(_workloads()))


def get_workload(name: str) -> Workload:
    """The workload named `name`, or one holding an op of that name (`kmeans_assign` -> flash_kmeans)."""
    workloads = _workloads()
    if name in workloads:
        return workloads[name]
    for workload in workloads.values():
        if any(spec.contract == name for spec in workload.ops):
            return workload
    raise UnknownWorkloadError(f"no workload named or holding {name!r}; workloads: {', '.join(sorted(workloads))} "
                               f"(workloads register through the `{ENTRY_POINT_GROUP}` entry points)")


def workload_for_op(op: str) -> Workload:
    return get_workload(op)


def choice_configs(path: Path) -> tuple[str, list[ChoiceConfig]]:
    """The op a per-shape choice table (JSON with an "op" key) is for, and its configurations, read by the
    op's own `choice_loader`. ValueError when the file is not such a table or its op declares no loader."""
    import importlib
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable JSON choice table ({error})") from None
    op = data.get("op") if isinstance(data, dict) else None
    if not isinstance(op, str):
        raise ValueError(f'{path}: a choice table names its op ("op": "kmeans_update")')
    try:
        spec = workload_for_op(op).op(op)
    except KeyError as error:  # UnknownWorkloadError too
        raise ValueError(f"{path}: {error}") from None
    if spec.choice_loader is None:
        raise ValueError(f"{path}: op {op!r} declares no choice table loader (OpSpec.choice_loader)")
    module, _, func = spec.choice_loader.rpartition(":")
    configs = getattr(importlib.import_module(module), func)(path)
    return op, list(configs)


def get_pipeline(name: str) -> tuple[Workload, Pipeline]:
    """The pipeline named `name` (`lloyd_iteration`) and the workload declaring it."""
    workloads = _workloads()
    for workload in workloads.values():
        for pipeline in workload.pipelines:
            if pipeline.name == name:
                return workload, pipeline
    known = sorted(p.name for w in workloads.values() for p in w.pipelines)
    raise UnknownWorkloadError(f"no workload declares a pipeline {name!r}; pipelines: {', '.join(known) or 'none'}")


def schedule_loader_for(op: str) -> str | None:
    """The loader reference for `op`'s schedules when its workload declares one (a wrapper supplying what a
    schedule cannot take, e.g. KDA's optional inputs); None: the lowering's own loader."""
    try:
        workload = get_workload(op)
    except UnknownWorkloadError:
        return None
    for spec in workload.ops:
        if spec.contract == op:
            return spec.schedule_loader
    return None
