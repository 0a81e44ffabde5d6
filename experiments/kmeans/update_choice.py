"""The op's default deterministic update as a per-shape choice: a table of buckets over one dim rule, each
naming a schedule of this folder and its param assignment (data: `update_buckets.json`, or a table a GPU run wrote).

Why buckets, and by what: the update's reduce walks each cluster's segment in BC-row steps with one program
per (cluster, batch), so its time at a shape is set by the mean cluster size N / K (steps per program) and by
how few programs there are (B * K). The launches before it (histogram, scans, scatter) scale with B * N and
are the same code in every bucket. A bucket is therefore chosen by the mean points per cluster `N // K`
(per batch), never by a benchmark shape's name; the thresholds and the assignments are data in the table,
with the evidence that chose them.

    table = load_table(DEFAULT_TABLE)
    table.choose({"B": 1, "N": 1 << 20, "K": 1024, "D": 128}).name   # the bucket a shape runs in
    update = load_bucketed(str(DEFAULT_TABLE), backend="triton")      # a callable with the op's signature

`cake export TABLE.json` exports each configuration and routes each declared GPU shape's bucket to its
configuration first (`export_configs`, the op's `choice_loader`). `load_bucketed` is also a verifier loader (`KernelRef.loader(BUCKETED_LOADER, table_path, {...})`). The
verifier's gate shapes are small, so they reach only the buckets whose rule they meet: every configuration
of a table is gated on its own (`config_refs`, scripts/gpu_update_gates.py) before the table is timed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().parent
DEFAULT_TABLE = FOLDER / "update_buckets.json"
BUCKETED_LOADER = f"{__name__}:load_bucketed"
OP = "kmeans_update"  # the op every table here is for (its "op" key: `cake export TABLE.json` reads it)
# The one rule a table may use: the mean points per cluster of one batch (N // K).
RULE = "points_per_cluster"


class UpdateTableError(ValueError):
    """A bucket table that cannot be used: what is wrong, in which file, and how to fix it."""


@dataclass(frozen=True, slots=True)
class Bucket:
    name: str
    at_least: int  # the smallest N // K this bucket serves
    schedule: str  # a .cake file of this workload's folder (or an absolute path)
    params: tuple[tuple[str, int], ...] = ()  # over the schedule's own defaults

    @property
    def config(self) -> tuple[str, tuple[tuple[str, int], ...]]:
        """What is lowered and gated: two buckets with the same config share one kernel."""
        return self.schedule, self.params

    def describe(self) -> str:
        shown = " ".join(f"{k}={v}" for k, v in self.params) or "defaults"
        return f"{self.schedule} ({shown})"


@dataclass(frozen=True, slots=True)
class UpdateTable:
    path: Path
    buckets: tuple[Bucket, ...]  # ascending `at_least`, the first at 0
    evidence: str = ""

    def choose(self, dims: Mapping[str, int]) -> Bucket:
        """The bucket serving a call with these dims (B, N, K): the last whose threshold N // K reaches."""
        points = dims["N"] // max(dims["K"], 1)
        return [b for b in self.buckets if b.at_least <= points][-1]

    def configs(self) -> list[Bucket]:
        """One bucket per distinct (schedule, params): the configurations to gate."""
        seen: dict[tuple[str, tuple[tuple[str, int], ...]], Bucket] = {}
        for bucket in self.buckets:
            seen.setdefault(bucket.config, bucket)
        return list(seen.values())

    def schedule_path(self, bucket: Bucket) -> Path:
        # Relative to the workload's folder, not the table's: a table a GPU run writes under $RES names the
        # same schedules as the committed one, and can be committed as it is.
        return FOLDER / bucket.schedule


def _bucket(raw: object, where: str) -> Bucket:
    if not isinstance(raw, dict):
        raise UpdateTableError(f"{where}: a bucket must be an object with name, at_least, schedule, params")
    missing = [k for k in ("name", "at_least", "schedule") if k not in raw]
    if missing:
        raise UpdateTableError(f"{where}: missing {', '.join(missing)}")
    params = raw.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in params.values()):
        raise UpdateTableError(f"{where}: params must map param names to integers, got {params!r}")
    at_least = raw["at_least"]
    if not isinstance(at_least, int) or at_least < 0:
        raise UpdateTableError(f"{where}: at_least must be an integer >= 0, got {at_least!r}")
    return Bucket(str(raw["name"]), at_least, str(raw["schedule"]), tuple(sorted(params.items())))


def parse_table(data: object, path: Path) -> UpdateTable:
    """Validate a table's JSON: one known rule, buckets ascending from 0, schedules that exist."""
    if not isinstance(data, dict) or data.get("rule") != RULE:
        raise UpdateTableError(f"{path}: the table needs \"rule\": \"{RULE}\" (the mean points per cluster N // K)")
    if data.get("op") != OP:
        raise UpdateTableError(f"{path}: the table needs \"op\": \"{OP}\", got {data.get('op')!r}")
    raw = data.get("buckets")
    if not isinstance(raw, list) or not raw:
        raise UpdateTableError(f"{path}: \"buckets\" must be a non-empty list")
    buckets = tuple(_bucket(b, f"{path}: bucket {i}") for i, b in enumerate(raw))
    thresholds = [b.at_least for b in buckets]
    if thresholds[0] != 0 or any(a >= b for a, b in zip(thresholds, thresholds[1:], strict=False)):
        raise UpdateTableError(f"{path}: at_least must start at 0 (every shape has a bucket) and strictly "
                               f"increase; got {thresholds}")
    names = [b.name for b in buckets]
    if len(set(names)) != len(names):
        raise UpdateTableError(f"{path}: bucket names repeat: {names}")
    table = UpdateTable(path, buckets, str(data.get("evidence", "")))
    absent = [b.schedule for b in buckets if not table.schedule_path(b).is_file()]
    if absent:
        raise UpdateTableError(f"{path}: schedule(s) {absent} not found in the workload's folder ({FOLDER})")
    return table


def load_table(path: Path) -> UpdateTable:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UpdateTableError(f"{path}: no such bucket table") from None
    except json.JSONDecodeError as error:
        raise UpdateTableError(f"{path}: not JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
    return parse_table(data, path)


def table_json(table: UpdateTable) -> dict[str, Any]:
    return {"op": OP, "rule": RULE, "evidence": table.evidence,
            "buckets": [{"name": b.name, "at_least": b.at_least, "schedule": b.schedule, "params": dict(b.params)}
                        for b in table.buckets]}


def export_configs(path: Path) -> list[Any]:
    """The table's configurations for `cake export TABLE.json` (the op's `choice_loader`): each with the declared
    GPU shapes of the op that the table sends to it, so the exported dispatcher tries it first there."""
    from cake.experiments.kmeans.workload import UPDATE
    from cake.experiments.workload import ChoiceConfig

    table = load_table(path)
    return [ChoiceConfig(table.schedule_path(b), b.params,
                         tuple(s.name for s in UPDATE.gpu_shapes if table.choose(s.dim_map).config == b.config))
            for b in table.configs()]


def config_ref(table: UpdateTable, bucket: Bucket, backend: str) -> Any:
    """The verifier's reference to one bucket's configuration (the schedule loader with its params)."""
    from cake.lowering.runtime import SCHEDULE_LOADER
    from cake.verifier.worker_protocol import KernelRef

    options = {"backend": backend, "params": json.dumps(dict(bucket.params), sort_keys=True)}
    return KernelRef.loader(SCHEDULE_LOADER, str(table.schedule_path(bucket).resolve()), options)


@dataclass
class BucketedUpdate:
    """The op's update with the op's signature: each call runs the kernel of the bucket its dims fall in
    (each bucket's kernel lowered and loaded once, on its first call)."""

    table: UpdateTable
    backend: str
    _loaded: dict[str, Callable[..., Any]] = field(default_factory=dict)  # bucket name -> kernel
    # (N, K) -> kernel: a repeated call signature pays one dict lookup, not the rule (host time shows at B=1).
    _by_dims: dict[tuple[int, int], Callable[..., Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.__name__ = f"bucketed_update[{self.table.path.name}]"

    def kernel(self, bucket: Bucket) -> Callable[..., Any]:
        hit = self._loaded.get(bucket.name)
        if hit is None:
            from cake.lowering.runtime import load_schedule

            hit = load_schedule(str(self.table.schedule_path(bucket)), backend=self.backend,
                                params=json.dumps(dict(bucket.params)))
            self._loaded[bucket.name] = hit
        return hit

    def __call__(self, x: Any, ids: Any, c_old: Any) -> Any:
        dims = (x.shape[1], c_old.shape[1])
        kernel = self._by_dims.get(dims)
        if kernel is None:
            kernel = self.kernel(self.table.choose({"B": x.shape[0], "N": dims[0], "K": dims[1]}))
            self._by_dims[dims] = kernel
        return kernel(x, ids, c_old)


def load_bucketed(path: str, *, backend: str = "triton") -> BucketedUpdate:
    """The verifier's loader for a bucket table (`BUCKETED_LOADER`)."""
    return BucketedUpdate(load_table(Path(path)), backend)
