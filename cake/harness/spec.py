"""An experiment spec: a TOML file naming a grid of `cake evolve` runs.

    name = "static-checks"              # the experiment's name (reports, default directory)
    seeds = [0, 1, 2, 3, 4]             # every arm runs once per seed

    [evolve]                            # cake evolve flags shared by every run (dashes or underscores)
    op = "flash_kmeans"
    turns = 8
    budget = 24

    [grid]                              # one axis per flag; each combination of values is an arm
    static_checks = [true, false]       # a boolean is a --flag / --no-flag pair

A run is `cake evolve <evolve flags> <the arm's flags> --seed S`, so every option of `cake evolve` is an axis,
and each run directory can also be continued by hand with `cake evolve --resume`. Which flags exist is the
CLI's to check (it parses each run's arguments before anything runs).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Value = bool | int | float | str
# Flags an experiment owns: where runs go, which seed, how they execute.
RESERVED = frozenset({"seed", "out", "resume", "executor", "ray_address"})


class SpecError(ValueError):
    """A spec file that does not describe a grid of runs (the message names the key)."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run of the grid: an arm (its flag values) at one seed."""

    arm: str  # "static_checks=off" — the arm's label, "base" when the grid is empty
    seed: int
    flags: tuple[tuple[str, Value], ...]  # the shared flags, then the arm's

    @property
    def name(self) -> str:
        """The run's directory name: the arm and the seed, filesystem-safe."""
        return f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', self.arm).replace('=', '-')}__s{self.seed}"

    def argv(self) -> list[str]:
        """The run as `cake evolve` arguments."""
        out: list[str] = []
        for key, value in self.flags:
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                out.append(flag if value else "--no-" + key.replace("_", "-"))
            else:
                out += [flag, str(value)]
        return [*out, "--seed", str(self.seed)]


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    name: str
    seeds: tuple[int, ...]
    evolve: tuple[tuple[str, Value], ...]
    grid: tuple[tuple[str, tuple[Value, ...]], ...]
    text: str  # the file as written: kept in the experiment directory

    def arms(self) -> list[tuple[tuple[str, Value], ...]]:
        keys = [k for k, _ in self.grid]
        return [tuple(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in self.grid))]

    def runs(self) -> list[RunSpec]:
        """Arm by arm, seed by seed (the order they run in)."""
        return [RunSpec(arm_label(arm), seed, (*self.evolve, *arm)) for arm in self.arms() for seed in self.seeds]


def arm_label(arm: Sequence[tuple[str, Value]]) -> str:
    if not arm:
        return "base"
    return ",".join(f"{k}={_show(v)}" for k, v in arm)


def _show(value: Value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _key(key: str, where: str) -> str:
    norm = key.replace("-", "_")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", norm):
        raise SpecError(f"{where}: {key!r} is not a cake evolve flag name")
    if norm in RESERVED:
        raise SpecError(f"{where}: {key!r} is set by the experiment (seeds, directories, --executor), not the spec")
    return norm


def _value(value: Any, where: str) -> Value:
    if isinstance(value, bool | int | float | str):
        return value
    raise SpecError(f"{where}: {value!r} is not a number, string or boolean")


def parse_spec(text: str, source: str = "<spec>") -> ExperimentSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{source}: {error}") from None
    unknown = set(data) - {"name", "seeds", "evolve", "grid"}
    if unknown:
        raise SpecError(f"{source}: unknown keys {', '.join(sorted(unknown))} (name, seeds, [evolve], [grid])")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError(f"{source}: `name` (a string) is required")
    seeds = data.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool)
                                                           for s in seeds):
        raise SpecError(f"{source}: `seeds` must be a non-empty list of integers")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{source}: `seeds` repeats a seed")
    evolve = data.get("evolve", {})
    grid = data.get("grid", {})
    if not isinstance(evolve, Mapping) or not isinstance(grid, Mapping):
        raise SpecError(f"{source}: [evolve] and [grid] are tables")
    shared = tuple((_key(k, f"{source} [evolve]"), _value(v, f"{source} [evolve] {k}")) for k, v in evolve.items())
    axes = []
    for k, values in grid.items():
        where = f"{source} [grid] {k}"
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where}: an axis is a non-empty list of values")
        axes.append((_key(k, where), tuple(_value(v, where) for v in values)))
    overlap = {k for k, _ in shared} & {k for k, _ in axes}
    if overlap:
        raise SpecError(f"{source}: {', '.join(sorted(overlap))} is both in [evolve] and in [grid]")
    return ExperimentSpec(name, tuple(seeds), shared, tuple(axes), text)


def load_spec(path: Path) -> ExperimentSpec:
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"{path}: {error.strerror}") from None
    return parse_spec(text, str(path))
