"""The cost model's data: constants per target, calibration factors, and how factors are fitted.

Constants live in `ir/data/cost_calibration.json` (committed): priors per target, with sources. A calibration
is a set of `Factors`, each multiplying the time of one term of the model, stored per (backend, device,
toolchain) by `cake.ir.cost_calibrations` and fitted from measured runs by
`fit_factors`: least squares on log time (the model exists to rank, and a ratio error is what matters for
ranking), regularized toward 1.0, inside bounds; the result says which factors ended at a bound (a fit that
needs a term scaled 16x is telling us the term's physics is wrong, not that the factor is 16) and which
never changed a prediction. `spearman`, `top_k_recall` and `top_k_regret` are the figures we report.

`load_calibration_targets` turns the distiller's `calibration_targets.jsonl` (mispredictions of a run) into
the same `MeasuredSample`s the fit uses, for the (device, toolchain) being fitted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from cake.arch import UnknownArchError, device_for

if TYPE_CHECKING:  # cake.ir.cost imports this module; the loader imports it lazily
    from cake.ir.cost import Prediction

DATA_PATH = Path(__file__).resolve().parent / "data" / "cost_calibration.json"


@dataclass(frozen=True, slots=True)
class CostConstants:
    """Per-target priors of the analytic model (units in the names)."""

    arch: str
    smem_bytes_per_clock_per_sm: int
    l2_to_hbm_bandwidth_ratio: float
    memory_latency_ns: float
    sync_cycles: float
    launch_overhead_s: float
    grid_sync_s: float  # one grid-wide barrier (`fuse`): what a fused launch pays instead of a launch overhead
    warps_for_full_cuda_issue: int
    warps_for_full_tensor_issue: int
    register_base_per_thread: int
    pingpong_residual: float  # fraction of the shorter of MMA / CUDA-core time a ping-pong does not hide
    # The tensor cores and shared memory share a pipe: an mma reads its shared operands through the port that TMA
    # fills and CUDA-core reads use. Their times combine as this p-norm instead of a max (`cost_timing.combine`):
    # the max where one is far smaller, 2**(1/p) x it where they are equal (>= 1; a large p is the max).
    tensor_smem_norm: float
    sfu_op_cost: float  # exp/log/sqrt cost in plain ALU ops
    rows_per_warp: int  # accumulator rows one warp covers (mma fragment height)
    cols_per_warp: int  # narrowest column strip a warp covers before it replicates work
    accumulator_live_copies: float  # live register copies of the largest mma result
    local_memory_latency_cycles: float  # one spilled register's store or reload round trip
    iteration_latency_cycles: float  # the dependent chain of one loop iteration of one CTA
    mma_sync_k_step: int  # k of one mma.sync instruction (the accumulator is touched per k-step)
    # Issue slots per element of a shared-memory tile read into registers for CUDA-core math (not as an
    # mma operand, which the tensor cores read themselves): swizzled addressing and bank conflicts.
    smem_elementwise_ops_per_element: float
    # Whether the backend turns a global->register tile load in a `pipelined` loop into asynchronous copies over
    # the loop's stages (else one buffer, loaded synchronously each iteration: no stages of latency hiding).
    register_loads_pipelined: bool
    # Of such a load, how many fewer shared buffers than the loop's stages the backend keeps (Triton's pipeliner
    # prefetches stages - 1 iterations ahead on Ampere and Hopper: 1); at least one buffer either way.
    pipelined_load_buffers_below_stages: int
    # 0: a tile load issues its vectors together (one memory latency). N > 0: each thread issues its N-byte
    # vectors one after another, each waiting a full memory latency (a dependent chain of the CTA).
    serial_load_vector_bytes: int
    # Issue slots per element of an elementwise expression that reads a 1-D vector loaded from global memory,
    # for a backend that keeps such a vector lazy (re-read from global at each element access; 0: the backend
    # holds it in registers, loaded once).
    lazy_vector_load_ops_per_element: float
    # Of a thread's serial tile-load vectors (`serial_load_vector_bytes`), how many the compiled code has in flight
    # before the first must land: the memory latencies a thread waits are ceil(vectors / this).
    serial_load_vectors_in_flight: int
    # Issue slots per source element of a row sum (`sum(e, axis=last)`) whose only tile operand is one 16-bit tile
    # the backend holds in shared memory, as the backend issues it (the elementwise ops of `e`, the shared reads and
    # the accumulation all included); 0: the backend has no such lowering, the sum is priced from its parts (the
    # elementwise ops, `smem_elementwise_ops_per_element` per shared element, one op per reduced element).
    row_sum_ops_per_element: float
    # The same sum when its outputs are not whole warps' worth, as a backend issues it a warp per output (lanes across
    # the row, then a shuffle butterfly): issue slots per source element, and a fixed part per output row (addresses,
    # the butterfly, the store); 0: no such lowering, the sum is priced from its parts.
    warp_row_sum_ops_per_element: float
    warp_row_sum_ops_per_row: float
    # Issue slots per output row of a row reduction (`min`/`argmin` along the last axis of a register tile) that
    # merging its partial results across the lanes sharing the row (an mma fragment's quad) costs each time it runs.
    # The per-element price of a reduction includes it (the priors were calibrated on code that merges every
    # iteration); a role that defers the merge of a running reduction (`defer`) saves it in every iteration but one.
    # 0: a deferral saves nothing the model can see.
    lane_merge_ops_per_row: float
    mma_form_rate: tuple[tuple[str, float], ...]  # instruction family -> fraction of the tensor peak
    dot_lowers_to: str  # what a backend-chosen `dot` becomes on this target
    source: str

    def form_rate(self, family: str) -> float:
        return dict(self.mma_form_rate).get(family, 0.0)


@dataclass(frozen=True, slots=True)
class Factors:
    """Multipliers on each term's time (1.0 = the prior rate; 2.0 = that work takes twice as long)."""

    tensor: float = 1.0
    cuda: float = 1.0
    smem: float = 1.0
    l2: float = 1.0
    hbm: float = 1.0
    latency: float = 1.0
    sync: float = 1.0
    overhead: float = 1.0
    spill: float = 1.0
    chain: float = 1.0

    def to_json(self) -> dict[str, float]:
        return asdict(self)


FACTOR_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Factors))


class UnknownTargetError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def toolchain_id() -> str:
    """This machine's Triton toolchain as calibrations key it, e.g. "triton-3.6.0+torch-2.11.0" (local version
    suffixes such as +cu130 dropped). Read from package metadata, so nothing heavy is imported. The CUDA
    backend's key comes from its `toolchain()` through `cake.ir.cost_calibrations.toolchain_key`."""
    from importlib.metadata import version

    return f"triton-{version('triton').split('+')[0]}+torch-{version('torch').split('+')[0]}"


def _read(path: Path = DATA_PATH) -> dict[str, object]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def current_codegen(backend: str, path: Path = DATA_PATH) -> str | None:
    """The codegen version of `backend` whose generated code the constants describe by default (`current_codegen`
    in the data; the backend's own version constant, which a test keeps equal), None for a backend with none."""
    return _current_codegen(_read(path), backend)


def _current_codegen(data: dict[str, object], backend: str) -> str | None:
    table = dict(data.get("current_codegen", {}))  # type: ignore[call-overload]
    version = table.get(backend)
    return None if version is None else str(version)


def constants_for(arch: str, backend: str | None = None, path: Path = DATA_PATH,
                  codegen: str | None = None) -> CostConstants:
    """The target's priors, with what `backend` does differently on it (`backend_overrides`: e.g. the CUDA
    backend lowers `via dot` to mma.sync on every target, where Triton picks wgmma on Hopper), and what its
    generated code does from a codegen version on (`codegen_overrides[backend][V]` applies to every version >= V:
    e.g. the CUDA row sum of a 16-bit shared tile, one row per lane since version 4). `codegen` is the version
    whose code is priced (timings of older code are re-predicted with theirs); None: `current_codegen`."""
    data = _read(path)
    table = data["constants"]
    assert isinstance(table, dict)
    if arch not in table:
        raise UnknownTargetError(f"the cost model has no constants for `{arch}`; known: {', '.join(table)}")
    raw = dict(table[arch])
    overrides = dict(data.get("backend_overrides", {}))  # type: ignore[call-overload]
    raw.update({k: v for k, v in dict(overrides.get(backend, {})).items() if k != "source"})
    by_version = dict(dict(data.get("codegen_overrides", {})).get(backend, {}))  # type: ignore[call-overload]
    if by_version:
        version = codegen if codegen is not None else _current_codegen(data, str(backend))
        if version is None or not version.isdigit():
            raise ValueError(f"the cost model prices {backend} code per codegen version (codegen_overrides), and "
                             f"`{version}` is not one; pass the integer version that lowered the timed code")
        for since in sorted(by_version, key=int):
            if int(since) <= int(version):
                raw.update({k: v for k, v in dict(by_version[since]).items() if k != "source"})
    raw["mma_form_rate"] = tuple(sorted((str(k), float(v)) for k, v in raw["mma_form_rate"].items()))
    if float(raw["tensor_smem_norm"]) < 1.0:
        raise ValueError(f"{path}: `{arch}` tensor_smem_norm {raw['tensor_smem_norm']} is below 1 (a p-norm of "
                         f"the tensor and shared-memory times; 1 adds them, larger approaches their max)")
    return CostConstants(arch=arch, **raw)


# ---- fitting and rank statistics -------------------------------------------------------------------------

def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2.0  # ties share their mean rank
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson on ranks, ties averaged)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("spearman needs two sequences of the same length >= 2")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va and vb else 0.0


def top_k_recall(predicted: Sequence[float], measured: Sequence[float], k: int) -> float:
    """Of the k truly fastest, the fraction the model also puts in its k fastest."""
    k = min(k, len(measured))
    best_true = set(sorted(range(len(measured)), key=lambda i: measured[i])[:k])
    best_pred = set(sorted(range(len(predicted)), key=lambda i: predicted[i])[:k])
    return len(best_true & best_pred) / k if k else 0.0


def top_k_regret(predicted: Sequence[float], measured: Sequence[float], k: int) -> float:
    """How much slower the fastest of the model's k fastest measured than the truly fastest (0.05 = 5% slower):
    what a search that times the model's top k loses. Recall counts near-ties as misses; this does not."""
    if not measured:
        raise ValueError("top_k_regret needs at least one measured time")
    best_pred = sorted(range(len(predicted)), key=lambda i: predicted[i])[:max(k, 1)]
    return min(measured[i] for i in best_pred) / min(measured) - 1.0


@dataclass(frozen=True, slots=True)
class Fit:
    """A fitted set of factors and what the fit says about itself."""

    factors: Factors
    rms_log_error: float  # root mean squared natural-log error of the fitted predictions
    at_bound: tuple[str, ...]  # factors that ended at a bound: the fit wanted more than the bounds allow
    inert: tuple[str, ...]  # factors that never changed a prediction (left at 1.0)
    bounds: tuple[float, float]
    regularization: float
    level: float = 1.0  # the common scale of every term, folded into `factors` (1.0 without a free level)

    def warning(self) -> str | None:
        if not self.at_bound:
            return None
        return (f"calibration factors at a bound ({', '.join(self.at_bound)}; bounds {self.bounds[0]:g}.."
                f"{self.bounds[1]:g}): their terms' physics is off, not their rates")


_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def fit_factors_to(predictions: Sequence[Prediction], measured_s: Sequence[float]) -> Fit:
    """`fit_factors` of timed predictions (each at prior factors) to their measured seconds. The search re-times
    every prediction thousands of times, so it re-times them all at once (`cost_timing.TermsBatch`, the rule of
    `Prediction.retimed`)."""
    from cake.ir.cost_timing import TermsBatch  # cake.ir.cost_timing imports this module

    batch = TermsBatch.of([[lp.terms for lp in p.launches] for p in predictions])
    return fit_factors(lambda f: batch.totals(f).tolist(), measured_s)


def fit_factors(predict: Callable[[Factors], Sequence[float]], measured: Sequence[float], *,
                bounds: tuple[float, float] = (1.0 / 16.0, 16.0), regularization: float = 0.01,
                names: Sequence[str] = FACTOR_NAMES, rounds: int = 12, grid_steps_per_octave: int = 2,
                free_level: bool = True) -> Fit:
    """Least squares on log time, regularized toward 1.0, by coordinate descent in log space.

    Minimizes mean_i (log predicted_i + log level - log measured_i)^2 + regularization * sum_f (log f)^2 with
    each factor and the level in `bounds`. The level (`free_level`, on by default) is one scale common to every
    term, set to its best value for each candidate set of factors and folded into the returned factors (every
    term scales with it, so it never changes a ranking): without it the fit takes the measured level from
    whichever single factor is cheapest to move under the regularization — on the CUDA backend the tensor
    term, whose 6x then swamped the terms that order the schedules (session 5). A level at a bound is
    reported in `at_bound` as "level": a units mismatch, not a rate. Each coordinate step scans a log grid (`grid_steps_per_octave`) and refines the best
    bracket by golden-section search, so the result is deterministic. `predict(factors)` re-times every
    sample with `factors` (cheap: the work counts are fixed).
    """
    lo, hi = math.log(bounds[0]), math.log(bounds[1])
    logs = [math.log(m) for m in measured]
    count = max(1, len(logs))

    def level_of(predicted: Sequence[float]) -> float:
        """The log scale (inside the bounds) that best maps these predictions onto the measurements; 0 without
        a free level."""
        if not free_level:
            return 0.0
        return min(hi, max(lo, sum(t - math.log(p) for p, t in zip(predicted, logs, strict=True)) / count))

    def loss(logf: dict[str, float]) -> float:
        f = Factors(**{k: math.exp(v) for k, v in logf.items()})
        predicted = predict(f)
        level = level_of(predicted)
        err = sum((math.log(p) + level - t) ** 2 for p, t in zip(predicted, logs, strict=True)) / count
        return err + regularization * sum(v * v for v in logf.values())

    current = {name: 0.0 for name in FACTOR_NAMES}
    best_loss = loss(current)
    steps = max(2, round((hi - lo) / math.log(2.0) * grid_steps_per_octave))
    grid = [lo + (hi - lo) * i / steps for i in range(steps + 1)]
    inert = set()
    for name in names:
        probe = dict(current, **{name: hi})
        if predict(Factors(**{k: math.exp(v) for k, v in probe.items()})) == \
                predict(Factors(**{k: math.exp(v) for k, v in current.items()})):
            inert.add(name)
    for _ in range(rounds):
        start_loss = best_loss
        for name in names:
            if name in inert:
                continue

            def at(v: float, name: str = name) -> float:
                return loss(dict(current, **{name: v}))

            values = [at(v) for v in grid]
            i = min(range(len(grid)), key=lambda j: values[j])
            a, b = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
            x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
            f1, f2 = at(x1), at(x2)
            for _ in range(30):
                if f1 < f2:
                    b, x2, f2 = x2, x1, f1
                    x1 = b - _GOLDEN * (b - a)
                    f1 = at(x1)
                else:
                    a, x1, f1 = x1, x2, f2
                    x2 = a + _GOLDEN * (b - a)
                    f2 = at(x2)
            candidates = [(values[i], grid[i]), (f1, x1), (f2, x2), (best_loss, current[name])]
            cand_loss, value = min(candidates)
            if cand_loss < best_loss:
                current[name], best_loss = value, cand_loss
        if start_loss - best_loss < 1e-10:
            break
    level = level_of(predict(Factors(**{k: math.exp(v) for k, v in current.items()})))
    factors = Factors(**{k: math.exp(v + level) for k, v in current.items()})
    fitted = predict(factors)
    rms = math.sqrt(sum((math.log(p) - t) ** 2 for p, t in zip(fitted, logs, strict=True)) / count)
    tol = 1e-3
    at_bound = tuple(k for k in names if k not in inert and (current[k] <= lo + tol or current[k] >= hi - tol))
    if free_level and (level <= lo + tol or level >= hi - tol):
        at_bound += ("level",)
    return Fit(factors, rms, at_bound, tuple(sorted(inert)), bounds, regularization, math.exp(level))


# ---- measured samples and the distiller's calibration targets ---------------------------------------------

@dataclass(frozen=True, slots=True)
class MeasuredSample:
    """One timed schedule: its prediction under prior factors (work counts fixed) and its measured time."""

    schedule: str  # a shipped schedule's file name, or `RUN_DIR/candidate ID` for a calibration target
    params: dict[str, int]
    measured_ms: float
    prediction: Prediction


@dataclass(frozen=True, slots=True)
class SkippedTarget:
    """A calibration-target record the loader did not use, and why."""

    source: str  # `PATH:LINE`
    candidate_id: object
    reason: str


@dataclass(frozen=True, slots=True)
class LoadedTargets:
    samples: tuple[MeasuredSample, ...]
    skipped: tuple[SkippedTarget, ...]

    def skip_counts(self) -> dict[str, int]:
        """Skipped records per reason kind (the text before the first colon)."""
        counts: dict[str, int] = {}
        for s in self.skipped:
            kind = s.reason.split(":", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def load_calibration_targets(paths: Sequence[Path | str], *, device: str, toolchain: str,
                             unrecorded_toolchain_ok: bool = False) -> LoadedTargets:
    """Read the distiller's `calibration_targets.jsonl` files into samples for the (device, toolchain) fit.

    Each record names its schedule by `ir_path`, relative to the JSONL's directory (the run directory; the
    record stores no IR text), and is re-predicted with prior factors at its `dims` and `dtype` on its device.
    Its device is the record's `device` if it has one, else the arch's default device — the one
    `cake evolve` predicted for. A record is skipped, with its reason, when its device or a recorded
    toolchain differs from the fit's, when it records no toolchain (the distiller does not record one yet)
    unless `unrecorded_toolchain_ok`, when it has no dims/dtype, or when its schedule is missing, does
    not parse or cannot be predicted (`CostError`). Malformed JSON is not skipped: it raises `json.JSONDecodeError`.
    """
    from cake.ir.cost import CostError, predict
    from cake.ir.nodes import DType
    from cake.ir.parser import parse_diagnostics

    samples: list[MeasuredSample] = []
    skipped: list[SkippedTarget] = []
    for raw_path in paths:
        path = Path(raw_path)
        run_dir = path.parent
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            record = json.loads(line)
            cid = record.get("candidate_id")

            def skip(reason: str, where: str = f"{path}:{lineno}", cid: object = cid) -> None:
                skipped.append(SkippedTarget(where, cid, reason))

            arch_name = record.get("arch")
            if not isinstance(arch_name, str):
                skip("no arch: the record names no target")
                continue
            try:
                rec_device = str(record.get("device") or device_for(arch_name).name)
            except UnknownArchError:
                skip(f"unknown arch: `{arch_name}` is not in cake.arch")
                continue
            if rec_device != device:
                skip(f"device: the record is for {rec_device}, the fit for {device}")
                continue
            rec_toolchain = record.get("toolchain")
            if rec_toolchain is None and not unrecorded_toolchain_ok:
                skip(f"toolchain: not recorded (pass unrecorded_toolchain_ok to assume {toolchain})")
                continue
            if rec_toolchain is not None and rec_toolchain != toolchain:
                skip(f"toolchain: the record is for {rec_toolchain}, the fit for {toolchain}")
                continue
            dims, dtype_name = record.get("dims"), record.get("dtype")
            if not isinstance(dims, dict) or not dtype_name:
                skip("shape: the record has no dims/dtype (its run's config has no fitness shape)")
                continue
            try:
                dtype = DType(str(dtype_name))
            except ValueError:
                skip(f"shape: unknown dtype `{dtype_name}`")
                continue
            schedule = run_dir / str(record.get("ir_path", f"candidates/{record.get('ir_hash')}.cake"))
            if not schedule.is_file():
                skip(f"schedule: {schedule} is missing")
                continue
            name = f"{run_dir.name}/candidate {cid}"
            kernel, diagnostics = parse_diagnostics(schedule.read_text(), str(schedule))
            if kernel is None:
                skip(f"schedule: {schedule} does not parse ({'; '.join(d.message for d in diagnostics)})")
                continue
            try:
                prediction = predict(kernel, dims={str(k): int(v) for k, v in dims.items()}, dtype=dtype,
                                     device=device, arch_name=arch_name, factors=Factors())
            except CostError as err:
                skip(f"predict: {err}")
                continue
            samples.append(MeasuredSample(name, {}, float(record["measured_ms"]), prediction))
    return LoadedTargets(tuple(samples), tuple(skipped))
