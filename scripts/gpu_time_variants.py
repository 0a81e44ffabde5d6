"""GPU: time a few hundred legal variants of the kmeans assign schedules on both backends, as runs the cost
model's fitter reads (issue 17 item 3: calibration per backend, held out by run).

Past 600 lines since session 5 added the `--only` re-check and the poisoned second call. The natural split is the
plan (enumerate, check, deal into runs) vs the worker pool (`gpu_worker`, `run_pool`, poisoning), which the
tests drive separately; it was not done in the session that grew it, for lack of time (issue 17's note).

    python3 scripts/gpu_time_variants.py --out "$RES/costdata"              # H200: ~4 minutes
    python3 scripts/gpu_time_variants.py --out /tmp/plan --dry-run          # CPU: the plan, and nvcc's rate
    python3 scripts/gpu_time_variants.py --out DIR --backend cuda \
        --only "assign_plain:BN=128 BK=64 STAGES=3 WARPS=8" --only ...      # re-time a few named variants
    python3 scripts/gpu_time_variants.py --out DIR --backend cuda --clock graph   # kernel-only times

1. Enumerate (CPU, this process): every sm_90a schedule of `kmeans_assign` the repository ships, varied as
   `bench_compile_enumeration.variants` varies it (each param value, each dtype choice, each mma width, one
   change at a time) plus every point of its param grid; for each backend, the variants the static checker
   accepts for that backend at the timing shape and the cost model can price, one per distinct IR text.
   `--only STEM:LABEL` (repeatable) keeps just the named variants (the schedule's file stem and the label
   the JSON's `outcomes` record), `--backend` one backend.
2. Split: per backend, a seeded shuffle dealt round-robin into `--runs` runs (default 3). Each run is its own
   run store (`OUT/runs/<backend>-<i>`), so the fitter can fit on some runs and rank another; the split is by
   enumeration seed, the same criterion as separate evolve runs that sample the same space. The runs are
   interleaved in time (a shared pool), so no run is timed under other conditions than another.
3. Compile and time (GPU): `--workers` worker processes (spawned, one CUDA context each) lower and load a
   variant and run it once at a warm-up shape with the timing shape's specialization (B=2 N=256, checked
   against the fp64 reference in full, on a second call whose output buffers held a poison value: a kernel
   that leaves part of its output unwritten must not pass on what an earlier variant left in the same
   caching-allocator block) — compilation on all cores at once; then, one worker at a time (the
   parent grants the GPU), the timing protocol at the timing shape (default B=8 N=16384 K=1024 D=128 bf16:
   cold L2, two rotated input sets, a few reps, sampled re-check). `--clock events` (the default) brackets the
   host call with device events, so a call whose host work outlasts the L2 flush (the CUDA backend's Python
   launch path encodes TMA descriptors and launches twice; other workers' nvcc runs on every core meanwhile) is
   timed with that host work; `--clock graph` captures the checked call in a CUDA graph per input set
   (`cake.verifier.timing.GraphReplay`) and times the replay: kernel-only device time. A call that cannot be
   captured is a verdict (`raised`), checked again under replay before it is timed. A worker that crashes or outlives its
   per-variant limit is killed and replaced, and its variant gets that verdict: a crash is a verdict, never a
   dead session. A time guard (`--budget-s`) stops handing out variants; the shuffled order makes a cut a fair
   sample, and variants not reached stay queued in their run.
4. Store: every variant is a candidate of its run (status, verdict text, measured median in ms), the run's
   config records backend, device, toolchain, the backend's codegen version, the clock, shape and the split. Prints a table and writes
   `OUT/gpu_time_variants.json`. Then `python3 scripts/fit_cost_model.py OUT/runs/*` fits and reports.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import random
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import bench_compile_enumeration as bce
from cake.experiments.schedules import param_grid, shipped_schedule_paths
from cake.ir.check import check, errors
from cake.ir.cost import CostError, predict
from cake.ir.cost_calibration import Factors
from cake.ir.cost_calibrations import toolchain_key
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.bind_params import bind_params
from cake.lowering.backend import get_backend

from cake.diagnostics import DiagnosticError
from cake.runs.store import CandidateStatus, Evaluation, FitnessKind, NewCandidate, RunStore, ir_hash

ROOT = Path(__file__).resolve().parents[1]
OP = "kmeans_assign"
ARCH = "sm_90a"
BACKENDS = ("triton", "cuda")
TIMING_DIMS = {"B": 8, "N": 16384, "K": 1024, "D": 128}
WARM_DIMS = {"B": 2, "N": 256, "K": 1024, "D": 128}  # the timing shape's divisibility, 1/256 of its work
DTYPE = "bf16"
WORKER_DEVICE = "cuda"  # where a worker's inputs live (a CPU test runs the worker under Triton's interpreter)
# What `--clock` times, as the run's config records it (the fitter keys a calibration by it).
CLOCKS = {"events": "device events around the eager host call (host work included where it outlasts the L2 flush)",
          "graph": "device events around a CUDA-graph replay of the call (kernel-only device time)"}


def _clock() -> Any:
    from cake.verifier.timing import CudaClock

    return CudaClock()


# ------------------------------------------------------------------------------------------------ the plan

@dataclass(frozen=True, slots=True)
class Job:
    id: int
    backend: str
    run: int
    schedule: str  # path relative to the repository
    label: str  # what changed from the schedule as written
    text: str  # the variant, printed canonically with its params' defaults set
    ir_hash: str
    predicted_ms: float  # the cost model's prior prediction at the timing shape (uncalibrated)


@dataclass
class Plan:
    jobs: list[Job]
    refused: Counter[str] = field(default_factory=Counter)  # backend: first code -> count
    variants: int = 0
    named: set[str] = field(default_factory=set)  # the `only` names that matched an enumerated variant


def assign_schedules(root: Path = ROOT / "experiments") -> list[Path]:
    """Every shipped schedule of the op that targets the timing arch."""
    out = []
    for path in shipped_schedule_paths(root):
        kernel = parse(path.read_text(), str(path))
        if kernel.op == OP and kernel.target == ARCH:
            out.append(path)
    return out


def candidate_variants(path: Path) -> list[bce.Variant]:
    """The enumeration's one-change variants of `path` and every point of its param grid."""
    text = path.read_text()
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    found = list(bce.variants(rel, text))
    for params in param_grid(parse(text, rel)):
        found.append(bce.Variant(rel, " ".join(f"{k}={v}" for k, v in params.items()), text,
                                 tuple(sorted(params.items()))))
    return found


def variant_key(schedule: str, label: str) -> str:
    """How `--only` names a variant: the schedule's file stem and the variant's label."""
    return f"{Path(schedule).stem}:{label}"


def plan(paths: Sequence[Path], runs: int, seed: int, limit: int | None = None,
         dims: Mapping[str, int] = TIMING_DIMS, only: Collection[str] | None = None,
         backends: Sequence[str] = BACKENDS) -> Plan:
    """Legal, priced, distinct variants per backend, shuffled (seeded) and dealt into `runs` runs; with
    `only`, just the variants it names (`variant_key`)."""
    out = Plan([])
    per_backend: dict[str, dict[str, tuple[bce.Variant, str, float]]] = {b: {} for b in backends}
    for path in paths:
        for variant in candidate_variants(path):
            if only is not None:
                if variant_key(variant.schedule, variant.label) not in only:
                    continue
                out.named.add(variant_key(variant.schedule, variant.label))
            out.variants += 1
            if any(choice != DTYPE for _, choice in variant.dtypes):
                out.refused["not the timing dtype"] += 1  # it would refuse the timing inputs
                continue
            kernel = bind_params(variant.kernel(), {}, file=variant.schedule)
            text = print_kernel(kernel)
            for backend in backends:
                if ir_hash(text) in per_backend[backend]:
                    continue
                found = errors(check(kernel, arch=ARCH, backend=backend, dims=dict(dims)))
                if found:
                    out.refused[f"{backend}: {found[0].code}"] += 1
                    continue
                try:
                    predicted = predict(kernel, dims=dims, dtype=DType(DTYPE), backend=backend,
                                        factors=Factors()).time_ms
                except CostError:
                    out.refused[f"{backend}: not priced"] += 1
                    continue
                per_backend[backend][ir_hash(text)] = (variant, text, predicted)
    rng = random.Random(seed)
    next_id = 0
    for backend in backends:
        items = sorted(per_backend[backend].items())
        rng.shuffle(items)
        for i, (digest, (variant, text, predicted)) in enumerate(items[:limit]):
            out.jobs.append(Job(next_id, backend, i % runs, variant.schedule, variant.label, text, digest, predicted))
            next_id += 1
    random.Random(seed + 1).shuffle(out.jobs)  # backends and runs interleaved in time: a cut is a fair sample
    return out


# ------------------------------------------------------------------------------------------------ workers

@dataclass(frozen=True, slots=True)
class Outcome:
    job: int
    verdict: str  # timed | wrong | refused | compile failed | raised | crashed | timeout | not reached
    detail: str = ""
    times_ms: tuple[float, ...] = ()
    load_s: float = 0.0
    time_s: float = 0.0

    @property
    def measured_ms(self) -> float | None:
        return sorted(self.times_ms)[len(self.times_ms) // 2] if self.times_ms else None


def gpu_worker(conn: Connection, seed: int, clock_kind: str = "events") -> None:
    """A spawned worker: ("load", job) -> ("loaded", id, None | (verdict, detail), fatal); ("time", id) ->
    ("timed", id, times, failure, fatal); None -> exit. It first says ("hello", device name, toolchains).
    `fatal`: the worker's CUDA context is broken; the pool replaces it after taking the verdict. With
    `clock_kind` "graph", a checked call is captured in a CUDA graph, checked again under replay, and timed
    as a replay (`CLOCKS`)."""
    import torch
    from cake.lowering.runtime import load, lower
    from cake.verifier.registry import get_contract
    from cake.verifier.runner import kernel_errors
    from cake.verifier.timing import (
        Contestant,
        GraphReplay,
        TimingConfig,
        Verification,
        make_inputs,
        measure,
        spot_check,
    )

    contract = get_contract(OP)
    clock = _clock()
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[DTYPE]
    warm = make_inputs(contract, WARM_DIMS, dtype, WORKER_DEVICE, seed=seed)
    sets = [make_inputs(contract, TIMING_DIMS, dtype, WORKER_DEVICE, seed=seed + 1 + i) for i in range(2)]
    full = spot_check(contract, dtype, {})
    sampled = spot_check(contract, dtype, {"B": 1, "N": 64})
    timing = TimingConfig(warmup_calls=2, min_reps=5, max_reps=20, max_wall_s=0.25)
    conn.send(("hello", getattr(clock, "device_name", WORKER_DEVICE), {b: toolchain_key(get_backend(b).toolchain()) for b in BACKENDS}))
    loaded: dict[int, Any] = {}
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg[0] == "load":
            job: Job = msg[1]
            loaded.clear()
            try:
                kernel = parse(job.text, job.schedule)
                fn = load(lower(kernel, job.backend, filename=f"{job.schedule}[{job.label}]", source_text=job.text))
            except DiagnosticError as refused:
                conn.send(("loaded", job.id, ("refused", refused.diagnostics[0].code + " " +
                                              refused.diagnostics[0].message[:200]), False))
                continue
            try:
                out = fn(*warm)
                clock.synchronize()
                # Elements a kernel never writes keep what its fresh output buffers held, which can be an
                # earlier variant's right answer (same inputs, same caching-allocator block). Poison the
                # buffers, free them, and check a second call: the same allocation sequence gets them back.
                poison(out)
                del out
                out = fn(*warm)
                clock.synchronize()
                reason = full(warm, (out,) if torch.is_tensor(out) else tuple(out))
            except DiagnosticError as failed:  # the backend's compiler rejected the generated code
                conn.send(("loaded", job.id, ("compile failed", failed.diagnostics[0].message[:300]), False))
                continue
            except kernel_errors() as raised:  # the one boundary: a kernel that raises is a verdict
                conn.send(("loaded", job.id, ("raised", f"{type(raised).__name__}: {str(raised)[:300]}"),
                           not _context_usable(clock)))
                continue
            if reason is not None:
                conn.send(("loaded", job.id, ("wrong", reason[:300]), False))
                continue
            if clock_kind == "graph":
                fn = GraphReplay(fn)
                try:  # captured at the warm-up shape, and the replay's output checked like the eager call's
                    out = fn(*warm)
                    clock.synchronize()
                    reason = full(warm, (out,) if torch.is_tensor(out) else tuple(out))
                except kernel_errors() as raised:
                    conn.send(("loaded", job.id, ("raised", f"CUDA-graph capture or replay: {type(raised).__name__}: "
                                                            f"{str(raised)[:260]}"), not _context_usable(clock)))
                    continue
                if reason is not None:
                    conn.send(("loaded", job.id, ("wrong", f"under CUDA-graph replay: {reason[:260]}"), False))
                    continue
            loaded[job.id] = fn
            conn.send(("loaded", job.id, None, False))
        elif msg[0] == "time":
            fn = loaded.pop(msg[1])
            contestant = Contestant(str(msg[1]), fn, verification=Verification(
                True, "quick check", "fp64 in full at the warm-up shape, sampled at the timing shape"))
            try:
                (samples,) = measure([contestant], sets, clock, sampled, timing)
            except kernel_errors() as raised:
                conn.send(("timed", msg[1], (), f"raised: {type(raised).__name__}: {str(raised)[:300]}",
                           not _context_usable(clock)))
                continue
            conn.send(("timed", msg[1], samples.times_ms, samples.failure, False))


def poison_value(dtype: Any) -> float | int:
    """A value no correct kernel writes: NaN for floats, the most negative integer otherwise (an index
    or a count is never negative)."""
    import torch

    return float("nan") if dtype.is_floating_point else int(torch.iinfo(dtype).min)


def poison(out: Any) -> None:
    """Fill a kernel's output tensor (or tuple of them) with `poison_value`, in place."""
    import torch

    for tensor in (out,) if torch.is_tensor(out) else tuple(out):
        tensor.fill_(poison_value(tensor.dtype))


def _context_usable(clock: Any) -> bool:
    """False when a kernel left a sticky CUDA error (an illegal address poisons the context): the worker must
    then be replaced, and says so with its verdict, so that no later variant inherits the fault."""
    try:
        clock.synchronize()
    except RuntimeError:
        return False
    return True


# ------------------------------------------------------------------------------------------------ the pool

@dataclass
class _Slot:
    proc: Any  # multiprocessing.Process
    conn: Connection
    job: Job | None = None
    phase: str = "starting"  # starting | idle | loading | waiting | timing
    since: float = 0.0
    load_s: float = 0.0


@dataclass
class PoolConfig:
    workers: int
    budget_s: float  # stop handing out variants past this (from the pool's start)
    load_limit_s: float  # per variant: lower, compile, warm-up and check
    time_limit_s: float  # per variant: the timing protocol
    drain_s: float = 25.0  # past the budget, how long variants in flight may finish before they are killed
    start_limit_s: float = 180.0  # a worker's imports and CUDA context
    seed: int = 0


@dataclass
class PoolResult:
    outcomes: dict[int, Outcome]
    device: str | None
    toolchains: dict[str, str]
    worker_restarts: int
    seconds: float


def run_pool(jobs: Sequence[Job], cfg: PoolConfig, *, target: Callable[[Connection, int], None] = gpu_worker,
             context: str = "spawn", on_hello: Callable[[str, dict[str, str]], None] | None = None,
             on_outcome: Callable[[Job, Outcome], None] | None = None) -> PoolResult:
    """Compile in parallel, time one at a time; every job ends with an outcome (or `not reached`).
    `on_hello(device, toolchains)` is called once, with the first worker's report, before any outcome."""
    ctx = mp.get_context(context)
    started = time.perf_counter()
    queue = deque(jobs)
    by_id = {j.id: j for j in jobs}
    outcomes: dict[int, Outcome] = {}
    slots: list[_Slot] = []
    gpu_wait: deque[_Slot] = deque()
    holder: _Slot | None = None
    device: str | None = None
    toolchains: dict[str, str] = {}
    restarts = 0
    start_failures = 0
    abort = "time guard"

    def spawn(index: int) -> _Slot:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=target, args=(child, cfg.seed + 1000 * index), daemon=True)  # type: ignore[attr-defined]
        proc.start()
        child.close()
        return _Slot(proc, parent, since=time.perf_counter())

    def finish(slot: _Slot, outcome: Outcome) -> None:
        outcomes[outcome.job] = outcome
        if on_outcome is not None:
            on_outcome(by_id[outcome.job], outcome)
        slot.job, slot.phase = None, "idle"

    def replace_slot(i: int, verdict: str, detail: str, respawn: bool = True) -> None:
        nonlocal holder, restarts, start_failures
        slot = slots[i]
        if slot.phase == "starting":
            start_failures += 1
        if slot.job is not None:
            finish(slot, Outcome(slot.job.id, verdict, detail, load_s=slot.load_s))
        if holder is slot:
            holder = None
        if slot in gpu_wait:
            gpu_wait.remove(slot)
        if slot.proc.is_alive():
            slot.proc.kill()
        slot.proc.join(5)
        slot.conn.close()
        slot.phase = "gone"
        if respawn:
            restarts += 1
            slots[i] = spawn(i)

    slots = [spawn(i) for i in range(cfg.workers)]
    while True:
        now = time.perf_counter()
        guard = now - started > cfg.budget_s
        for slot in slots:  # hand out work
            if slot.phase == "idle" and queue and not guard:
                slot.job = queue.popleft()
                slot.phase, slot.since = "loading", now
                slot.conn.send(("load", slot.job))
        if holder is None and gpu_wait:
            holder = gpu_wait.popleft()
            holder.phase, holder.since = "timing", now
            assert holder.job is not None
            holder.conn.send(("time", holder.job.id))
        busy = [s for s in slots if s.phase in ("loading", "waiting", "timing")]
        if not busy and (not queue or guard):
            break
        if guard and now - started > cfg.budget_s + cfg.drain_s:
            for i, slot in enumerate(slots):
                if slot.phase in ("loading", "waiting", "timing"):
                    replace_slot(i, "not reached", "time guard: stopped in flight", respawn=False)
            break
        if start_failures >= 2 * cfg.workers and device is None:
            abort = f"{start_failures} workers died before reporting (their tracebacks are above)"
            print(f"run_pool: {abort}; nothing can be timed", file=sys.stderr, flush=True)
            break
        ready = wait([s.conn for s in slots] + [s.proc.sentinel for s in slots], timeout=0.2)
        for i, slot in enumerate(list(slots)):
            if slot.conn in ready:
                try:
                    msg = slot.conn.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is None:
                    code = slot.proc.exitcode if not slot.proc.is_alive() else None
                    replace_slot(i, "crashed", f"worker died (exit code {code}) while {slot.phase}")
                    continue
                if msg[0] == "hello":
                    if device is None and on_hello is not None:
                        on_hello(msg[1], dict(msg[2]))
                    device, toolchains = msg[1], dict(msg[2])
                    slot.phase = "idle"
                elif msg[0] == "loaded":
                    assert slot.job is not None and msg[1] == slot.job.id
                    slot.load_s = time.perf_counter() - slot.since
                    if msg[2] is None:
                        slot.phase = "waiting"
                        gpu_wait.append(slot)
                    else:
                        finish(slot, Outcome(msg[1], msg[2][0], msg[2][1], load_s=slot.load_s))
                    if msg[3]:
                        replace_slot(i, "crashed", "")  # its job already has its verdict
                elif msg[0] == "timed":
                    assert slot.job is not None and msg[1] == slot.job.id
                    times, failure = tuple(msg[2]), msg[3]
                    holder = None
                    verdict = "timed" if times else ("raised" if str(failure).startswith("raised") else "wrong")
                    finish(slot, Outcome(msg[1], verdict, failure or "", times, slot.load_s,
                                         time.perf_counter() - slot.since))
                    if msg[4]:
                        replace_slot(i, "crashed", "")
            elif slot.proc.sentinel in ready and not slot.proc.is_alive():
                replace_slot(i, "crashed", f"worker died (exit code {slot.proc.exitcode}) while {slot.phase}")
        now = time.perf_counter()
        for i, slot in enumerate(slots):
            limit = {"loading": cfg.load_limit_s, "timing": cfg.time_limit_s, "starting": cfg.start_limit_s}
            if slot.phase in limit and now - slot.since > limit[slot.phase]:
                replace_slot(i, "timeout", f"over {limit[slot.phase]:.0f} s while {slot.phase}")
    for slot in slots:  # idle workers exit on None; any other is killed after a short grace
        if slot.proc.is_alive() and slot.phase != "gone":
            try:
                slot.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
    grace = time.perf_counter() + 10.0
    for slot in slots:
        slot.proc.join(max(0.0, grace - time.perf_counter()))
        if slot.proc.is_alive():
            slot.proc.kill()
            slot.proc.join(5)
    for job in jobs:
        if job.id not in outcomes:
            outcomes[job.id] = Outcome(job.id, "not reached", abort)
    return PoolResult(outcomes, device, toolchains, restarts, time.perf_counter() - started)


# ------------------------------------------------------------------------------------------------ stores

_STATUS = {"timed": CandidateStatus.PASSED, "wrong": CandidateStatus.FAILED, "raised": CandidateStatus.FAILED,
           "crashed": CandidateStatus.FAILED, "timeout": CandidateStatus.FAILED,
           "refused": CandidateStatus.ERROR, "compile failed": CandidateStatus.ERROR}


def split_criterion(runs: int, seed: int) -> str:
    return (f"per backend, the legal distinct variants in a random.Random({seed}) shuffle, dealt round-robin into "
            f"{runs} runs (run i holds positions i, i+{runs}, ...); all runs timed interleaved by one pool")


class Stores:
    """One run store per (backend, run), created on the first outcome (the device and toolchain come from
    the workers); each variant is a candidate of its run's turn 1, its outcome an evaluation."""

    def __init__(self, out: Path, plan_: Plan, runs: int, seed: int, dims: Mapping[str, int],
                 clock_kind: str = "events"):
        self.out, self.plan, self.runs, self.seed, self.dims = out, plan_, runs, seed, dict(dims)
        self.clock_kind = clock_kind
        self.stores: dict[tuple[str, int], RunStore] = {}
        self.ids: dict[int, int] = {}  # job id -> candidate id

    def open(self, device: str, toolchains: Mapping[str, str]) -> None:
        if self.stores:
            return
        for backend in [b for b in BACKENDS if any(j.backend == b for j in self.plan.jobs)]:  # planned ones
            for run in range(self.runs):
                jobs = [j for j in self.plan.jobs if (j.backend, j.run) == (backend, run)]
                config = {"kind": "variant timing (scripts/gpu_time_variants.py)", "workload": "flash_kmeans",
                          "op": OP, "arch": ARCH, "eval": {"backend": backend}, "device": device,
                          "toolchain": toolchains[backend], "codegen": get_backend(backend).codegen_version,
                          "clock": self.clock_kind, "clock_means": CLOCKS[self.clock_kind],
                          "dims": self.dims, "dtype": DTYPE,
                          "split": split_criterion(self.runs, self.seed), "run_index": run, "seed": self.seed}
                store = RunStore.create(self.out / "runs" / f"{backend}-{run}", config)
                ids = store.record_turn(1, [NewCandidate(j.ir_hash, j.text, Path(j.schedule).stem, (), "enumeration",
                                                         j.label, CandidateStatus.QUEUED,
                                                         features={"schedule": j.schedule, "label": j.label},
                                                         predicted_ms=j.predicted_ms) for j in jobs], tokens=0)
                self.ids.update({j.id: cid for j, cid in zip(jobs, ids, strict=True)})
                self.stores[(backend, run)] = store

    def record(self, job: Job, outcome: Outcome) -> None:
        status = _STATUS.get(outcome.verdict)
        if status is None:  # not reached: the candidate stays queued
            return
        self.stores[(job.backend, job.run)].record_evaluation(self.ids[job.id], Evaluation(
            status, None, (), {"load_s": outcome.load_s, "time_s": outcome.time_s, "reps": len(outcome.times_ms)},
            outcome.measured_ms, None, None, FitnessKind.MEASURED if outcome.measured_ms is not None else None,
            None if outcome.verdict == "timed" else f"{outcome.verdict}: {outcome.detail}", "cuda:0",
            outcome.load_s + outcome.time_s))

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


# ------------------------------------------------------------------------------------------------ CPU rate

def compile_rate(jobs: Sequence[Job], sample: int) -> dict[str, Any]:
    """Lower every job's variant (both backends: CPU work) and nvcc-compile a sample of the CUDA ones here:
    what the GPU host's pool will spend before any timing."""
    from cake.lowering.cuda.compile import CompileError, find_nvcc
    from cake.lowering.runtime import lower

    lowered: dict[str, list[float]] = {b: [] for b in BACKENDS}
    failures: list[str] = []
    cuda = []
    for job in jobs:
        t0 = time.perf_counter()
        try:
            low = lower(parse(job.text, job.schedule), job.backend, filename=job.schedule)
        except DiagnosticError as refused:
            failures.append(f"{job.backend} {job.schedule}[{job.label}]: {refused.diagnostics[0].code}")
            continue
        lowered[job.backend].append(time.perf_counter() - t0)
        if job.backend == "cuda":
            cuda.append((job, low))
    nvcc_s: list[float] = []
    nvcc_failures: list[str] = []
    if find_nvcc() is not None and sample:
        import tempfile

        from cake.lowering.cuda.compile import compile_cubin

        with tempfile.TemporaryDirectory() as tmp:
            for job, low in cuda[:sample]:
                t0 = time.perf_counter()
                smem = {launch.kname: launch.smem_bytes for launch in low.artifacts["launches"]} \
                    if "launches" in low.artifacts else None
                try:
                    compile_cubin(low.source, ARCH, smem_dynamic_bytes=smem, file=job.schedule, cache_root=Path(tmp))
                except CompileError as error:
                    nvcc_failures.append(f"{job.schedule}[{job.label}]: {error.diagnostics[0].message[:200]}")
                nvcc_s.append(time.perf_counter() - t0)
    return {"lower_s_mean": {b: (sum(v) / len(v) if v else None) for b, v in lowered.items()},
            "lowering_refused": failures, "nvcc_compiles": len(nvcc_s),
            "nvcc_s_mean": sum(nvcc_s) / len(nvcc_s) if nvcc_s else None, "nvcc_failures": nvcc_failures}


# ------------------------------------------------------------------------------------------------ main

def summarize(plan_: Plan, outcomes: Mapping[int, Outcome]) -> dict[str, Any]:
    table: dict[str, Counter[str]] = {}
    for job in plan_.jobs:
        table.setdefault(f"{job.backend}-{job.run}", Counter())[outcomes[job.id].verdict] += 1
    return {name: dict(c) for name, c in sorted(table.items())}


def print_table(summary: Mapping[str, Mapping[str, int]]) -> None:
    verdicts = sorted({v for c in summary.values() for v in c})
    print(f"{'run':10} " + " ".join(f"{v:>14}" for v in verdicts))
    for name, counts in summary.items():
        print(f"{name:10} " + " ".join(f"{counts.get(v, 0):>14}" for v in verdicts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None, help="at most this many variants per backend")
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--budget-s", type=float, default=230.0,
                        help="stop handing out variants this long after the script started (the plan included)")
    parser.add_argument("--drain-s", type=float, default=25.0, help="then let variants in flight finish this long")
    parser.add_argument("--load-limit-s", type=float, default=60.0, help="per variant: lower, compile, warm, check")
    parser.add_argument("--time-limit-s", type=float, default=15.0, help="per variant: the timing protocol")
    parser.add_argument("--dry-run", action="store_true", help="CPU: plan, lower every variant, time nvcc")
    parser.add_argument("--compile-sample", type=int, default=8, help="--dry-run: CUDA variants to nvcc-compile")
    parser.add_argument("--only", action="append", metavar="STEM:LABEL",
                        help="just this variant, e.g. 'assign_plain:BN=128 BK=64 STAGES=3 WARPS=8' (the schedule's "
                             "file stem and the label the JSON records); repeatable")
    parser.add_argument("--backend", choices=BACKENDS, action="append", help="just this backend; repeatable")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="events",
                        help="; ".join(f"{k}: {v}" for k, v in CLOCKS.items()))
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    t0 = time.perf_counter()
    backends = tuple(b for b in BACKENDS if b in (args.backend or BACKENDS))
    the_plan = plan(assign_schedules(), args.runs, args.seed, args.limit, only=args.only, backends=backends)
    unknown = sorted(set(args.only or ()) - the_plan.named)
    if unknown:
        parser.error(f"--only names no enumerated variant: {'; '.join(unknown)} (labels are as the JSON's "
                     "`outcomes` record them, e.g. 'assign_plain:BN=128 BK=64 STAGES=3 WARPS=8')")
    counts = Counter(f"{j.backend}-{j.run}" for j in the_plan.jobs)
    print(f"{the_plan.variants} variants enumerated; legal and distinct: "
          f"{', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; refused: {dict(the_plan.refused)} "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"timing_dims": TIMING_DIMS, "warm_dims": WARM_DIMS, "dtype": DTYPE, "arch": ARCH,
                              "clock": args.clock, "clock_means": CLOCKS[args.clock],
                              "runs": args.runs, "seed": args.seed, "split": split_criterion(args.runs, args.seed),
                              "variants_enumerated": the_plan.variants, "refused_by_checker": dict(the_plan.refused),
                              "jobs_per_run": dict(sorted(counts.items())), "plan_s": time.perf_counter() - t0}
    if args.dry_run:
        report["cpu_rate"] = compile_rate(the_plan.jobs, args.compile_sample)
        report["jobs"] = [{k: v for k, v in asdict(j).items() if k != "text"} for j in the_plan.jobs]
        print(json.dumps(report["cpu_rate"], indent=1))
        (args.out / "gpu_time_variants_plan.json").write_text(json.dumps(report, indent=1) + "\n")
        return 0
    stores = Stores(args.out, the_plan, args.runs, args.seed, TIMING_DIMS, args.clock)
    cfg = PoolConfig(args.workers, max(0.0, args.budget_s - (time.perf_counter() - t0)), args.load_limit_s,
                     args.time_limit_s, args.drain_s, seed=args.seed)
    result = run_pool(the_plan.jobs, cfg, target=functools.partial(gpu_worker, clock_kind=args.clock),
                      on_hello=stores.open, on_outcome=stores.record)
    stores.close()
    summary = summarize(the_plan, result.outcomes)
    print_table(summary)
    if args.only:  # a handful, named: each one's verdict
        for job in sorted(the_plan.jobs, key=lambda j: variant_key(j.schedule, j.label)):
            outcome = result.outcomes[job.id]
            ms = outcome.measured_ms
            print(f"{job.backend:6} {variant_key(job.schedule, job.label):48} {outcome.verdict:12} "
                  f"{'' if ms is None else f'{ms:.3f} ms'} {outcome.detail[:120]}")
    timed = [o for o in result.outcomes.values() if o.verdict == "timed"]
    report.update({"device": result.device, "toolchains": result.toolchains, "pool_s": result.seconds,
                   "worker_restarts": result.worker_restarts, "verdicts": summary, "timed": len(timed),
                   "mean_load_s": sum(o.load_s for o in timed) / len(timed) if timed else None,
                   "mean_time_s": sum(o.time_s for o in timed) / len(timed) if timed else None,
                   "outcomes": [{**asdict(result.outcomes[j.id]), "backend": j.backend, "run": j.run,
                                 "schedule": j.schedule, "label": j.label, "ir_hash": j.ir_hash,
                                 "predicted_ms": j.predicted_ms} for j in the_plan.jobs]})
    (args.out / "gpu_time_variants.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"{len(timed)} timed of {len(the_plan.jobs)} in {result.seconds:.0f} s on {result.device} "
          f"({result.worker_restarts} worker restarts); runs under {args.out / 'runs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
