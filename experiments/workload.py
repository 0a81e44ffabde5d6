"""Workloads: what `cake evolve --op NAME` evolves, at which shapes, against what, and how it is scored.

A `Workload` binds op contracts (by name, from `cake.verifier.contracts`) to everything an experiment needs:

* `ops`: one `OpSpec` per kernel — its **seed** schedules (what a clean-start search begins from), its
  **reference** schedules (strong hand-written ones, kept for comparison and never used to seed a clean
  start), a tiny CPU shape (Triton interpreter), the GPU shape domain, and the baselines;
* `pipelines`: end-to-end compositions of the ops (the Lloyd iteration = assign + update);
* `fitness`: how a verified candidate's timings become one number.

Look a workload up with `get_workload(name)` (or `workload_for_op(op)`); nothing heavy is imported until a
baseline is loaded. Baselines import their packages lazily and raise `BaselineUnavailable` with an install
hint when the package is missing, so a table can say "not installed" instead of crashing.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    def seed_paths(self) -> tuple[Path, ...]:
        return tuple(self.folder / name for name in self.seeds)

    def reference_paths(self) -> tuple[Path, ...]:
        return tuple(self.folder / name for name in self.references)

    def missing_files(self) -> tuple[Path, ...]:
        return tuple(p for p in self.seed_paths() + self.reference_paths() if not p.is_file())

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
class Pipeline:
    """An end-to-end composition of ops, timed as a whole against a library's own loop.

    `compose(kernels)` takes one callable per step (keyed by contract name, each taking that contract's
    inputs) and returns `run(*inputs)` doing `iterations` steps of the pipeline; its per-iteration time is
    the measured time divided by `iterations`. Inputs come from the contract named `inputs_from`.
    """

    name: str
    description: str
    steps: tuple[str, ...]
    inputs_from: str
    iterations: int
    compose: Callable[[Mapping[str, Callable[..., Any]]], Callable[..., Any]]
    baselines: tuple[Baseline, ...]


@dataclass(frozen=True, slots=True)
class Fitness:
    """How `cake evolve` scores a candidate for `op`.

    At each shape in `shapes`, the candidate and every baseline in `against` are timed interleaved by
    `cake.verifier.timing` (cold L2, rotated inputs, medians). The score is the geometric mean over the
    shapes of (fastest available baseline's median) / (candidate's median): > 1 beats the best baseline.
    A candidate that has not passed the contract gates, or fails the re-check after timing, has no score
    (None) — it is never ranked, not ranked last.
    """

    op: str
    shapes: tuple[str, ...]
    against: tuple[str, ...]

    def score(self, candidate_ms: Mapping[str, float], baseline_ms: Mapping[str, Mapping[str, float]]) -> float | None:
        """`candidate_ms[shape]` and `baseline_ms[baseline][shape]` are medians; missing baselines are skipped."""
        ratios = []
        for shape in self.shapes:
            if shape not in candidate_ms:
                return None
            times = [baseline_ms[b][shape] for b in self.against if shape in baseline_ms.get(b, {})]
            if not times:
                return None
            ratios.append(min(times) / candidate_ms[shape])
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    description: str
    ops: tuple[OpSpec, ...]
    fitness: Fitness
    pipelines: tuple[Pipeline, ...] = ()

    def op(self, contract: str) -> OpSpec:
        for spec in self.ops:
            if spec.contract == contract:
                return spec
        raise KeyError(f"workload {self.name} has no op {contract!r}; ops: {', '.join(o.contract for o in self.ops)}")

    def fitness_shape(self, contract: str) -> Shape:
        """The shape `cake evolve` scores `contract` at: the fitness shape for the fitness op, else the op's
        first GPU shape."""
        spec = self.op(contract)
        if self.fitness.op == contract and self.fitness.shapes:
            return spec.shape(self.fitness.shapes[0])
        return spec.gpu_shapes[0]

    @property
    def primary(self) -> OpSpec:
        """The op `cake evolve --op <workload>` evolves by default (the one fitness is defined on)."""
        return self.op(self.fitness.op)

    def seed_schedules(self) -> dict[str, tuple[Path, ...]]:
        """Clean-start seeds per op. Reference schedules are deliberately not here."""
        return {spec.contract: spec.seed_paths() for spec in self.ops}

    def reference_schedules(self) -> dict[str, tuple[Path, ...]]:
        return {spec.contract: spec.reference_paths() for spec in self.ops}


# Registered workloads: name -> module holding a `WORKLOAD` attribute (imported on first use).
_REGISTRY: dict[str, str] = {
    "flash_kmeans": "cake.experiments.flash_kmeans.workload",
    "starter": "cake.experiments.starter.workload",
    "kda": "cake.experiments.kda.workload",
}


class UnknownWorkloadError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def workload_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_workload(name: str) -> Workload:
    """The workload named `name`, or one holding an op of that name (`kmeans_assign` -> flash_kmeans)."""
    if name in _REGISTRY:
        workload = importlib.import_module(_REGISTRY[name]).WORKLOAD
        assert isinstance(workload, Workload)
        return workload
    return workload_for_op(name)


def workload_for_op(op: str) -> Workload:
    for module in _REGISTRY.values():
        workload = importlib.import_module(module).WORKLOAD
        if any(spec.contract == op for spec in workload.ops):
            assert isinstance(workload, Workload)
            return workload
    raise UnknownWorkloadError(f"no workload named or holding {op!r}; workloads: {', '.join(_REGISTRY)}")
