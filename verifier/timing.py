"""The timing protocol: how CAKE measures a kernel so that the number can be believed.

For one shape, every contestant (the candidate and its baselines) runs in this one process:

1. **Refusal.** A candidate whose `Verification` has not passed is refused before anything runs
   (`Unverified`): an unverified kernel has no time, not a slow one.
2. **Prepare + check.** Each contestant prepares every input set (outside the timed region) and runs once
   per set; that first run compiles, and its outputs are checked against the fp64 reference (`check`).
   A contestant failing here is not timed.
3. **Warm-up** past compilation: `warmup_calls` more calls each.
4. **Interleaved sampling** (ABAB...): rep r calls every live contestant in turn on input set r mod S, in a
   fixed order or, with `TimingConfig.shuffle_seed`, in a seeded shuffled order per rep (so no contestant
   always runs right after the same neighbour). Before each
   call the L2 is flushed (a write over a buffer twice the L2), so every call starts cold; device events
   bracket the call itself. The pool of S input sets holds more bytes than the L2, so nothing is reused.
   **The device never drains while sampling**: the events are read every `sync_every` reps, but a read waits
   only for the batch of reps *before* the one just queued, and the warm-up is not synchronized, so every
   timed call is queued behind device work. (Until session 26 each read synchronized the device; the first
   call after it then started on an idle GPU and its events took in the host's launch: in every stored
   sample of sessions 19-24 the candidate's rep after a read was slow, up to 1.89 ms against 1.19-1.34,
   `scripts/timing_sync_bias.py`.)
   Reps stop at `max_reps`, or at the wall-clock guard once `min_reps` are queued. With `retire_ratio`, a
   baseline far slower than the fastest baseline leaves the rotation once `min_reps` of its samples are read
   (it cannot be the baseline a speedup is taken against; calls already queued are kept); the candidate never
   does.
5. **Re-check.** The last outputs each contestant produced for each input set during timing are checked
   again: a kernel that computes less once it is warm fails here, and has no time.
6. **Report** (`summarize`): the median and spread, TFLOP/s and GB/s from the contract's counts, fractions
   of the measured ceilings (`DeviceSpec.gemm_ceiling_tflops`, `bandwidth_ceiling_bytes_per_s`), the roofline
   floor at datasheet peaks, and `implausible` when the median beats that floor.

Times come from a `Clock`. The only clock shipped is `CudaClock` (device events); events bracket the host call,
so a call whose host work outlasts the L2 flush before it is timed with that host work: `GraphReplay` wraps a
call so that only its device work runs between the events; `measure` takes the
clock as a parameter so its logic can be tested on a CPU with a scripted clock that lives in the tests.
There is no CPU timing path: with no GPU, `CudaClock()` raises `NoGpu`.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from cake.verifier.compare import compare
from cake.verifier.contracts import Contract, shape_of
from cake.verifier.expected import Expected, expected_from, to_reference_inputs
from cake.verifier.gates.resources import implausible_speed, roofline_floor_s
from cake.verifier.inputs import Case, Layout, ValueFamily, make_case
from torch import Tensor

from cake.arch import DeviceSpec, match_device

# ---- clocks ------------------------------------------------------------------------------------------------


class NoGpu(RuntimeError):
    """Timing needs a CUDA device; there is deliberately no CPU fallback."""


class Clock(Protocol):
    """Marks on the device's stream, elapsed times between them, and the L2 flush."""

    def record(self) -> object: ...

    def elapsed_ms(self, start: object, end: object) -> float: ...  # valid once the device has passed `end`

    def wait(self, mark: object) -> None: ...  # block the host until the device has passed `mark`

    def synchronize(self) -> None: ...  # block the host until the device has done everything queued

    def flush_l2(self) -> None: ...

    def wall_s(self) -> float: ...  # host wall clock, for the time guard only


L2_FLUSH_MULTIPLE = 2  # the flush buffer is this many times the L2


class CudaClock:
    """CUDA events on the current stream; the L2 flush zeroes a buffer of `L2_FLUSH_MULTIPLE` x the L2 size
    (from `cake.arch` when the device is known there, else from the driver)."""

    def __init__(self, device_spec: DeviceSpec | None = None):
        if not torch.cuda.is_available():
            raise NoGpu("no CUDA device: timings are only taken on a GPU (no CPU fallback, no fake numbers)")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        spec = device_spec or match_device(props.name)
        l2 = spec.l2_bytes if spec is not None else int(props.L2_cache_size)
        self.device_spec = spec
        self.device_name = props.name
        self._flush = torch.empty(L2_FLUSH_MULTIPLE * l2, dtype=torch.int8, device="cuda")

    def record(self) -> object:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def elapsed_ms(self, start: object, end: object) -> float:
        return float(start.elapsed_time(end))  # type: ignore[attr-defined]

    def wait(self, mark: object) -> None:
        mark.synchronize()  # type: ignore[attr-defined]

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def flush_l2(self) -> None:
        self._flush.zero_()

    def wall_s(self) -> float:
        return time.perf_counter()


class GraphReplay:
    """`fn` captured in a CUDA graph once per input set (keyed by the inputs' addresses) and replayed: the
    device work of the call without the host work around it (a generated launcher's checks, allocations and
    tensor-map encoding, a Python launch path slowed by other processes). The first call per set runs `fn`
    eagerly once (compiles, allocates), then captures; outputs live in the graph's pool and are rewritten by
    each replay. A call that cannot be captured raises the CUDA runtime's error from the first call."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.graphs: dict[tuple[int, ...], tuple[Any, Any]] = {}

    def __call__(self, *inputs: Any) -> Any:
        key = tuple(t.data_ptr() for t in inputs if isinstance(t, torch.Tensor))
        if key not in self.graphs:
            self.fn(*inputs)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = self.fn(*inputs)
            self.graphs[key] = (graph, out)
        graph, out = self.graphs[key]
        graph.replay()
        return out


# ---- contestants and settings ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verification:
    """Whether a kernel passed the contract gates (and how we know): the precondition for timing."""

    passed: bool
    source: str  # "battery", "cache", "quick check", ...
    detail: str = ""


class Unverified(Exception):
    """A candidate was handed to the protocol without a passing verification."""


def _identity(*inputs: Any) -> tuple[Any, ...]:
    return tuple(inputs)


@dataclass(frozen=True, slots=True)
class Contestant:
    """`run(*prepare(*inputs))` is timed; `prepare` runs once per input set, untimed. A candidate must carry
    a passing `verification`; a baseline is trusted to be a published implementation but is still checked."""

    name: str
    run: Callable[..., Any]
    prepare: Callable[..., tuple[Any, ...]] = _identity
    candidate: bool = True
    verification: Verification | None = None


@dataclass(frozen=True, slots=True)
class TimingConfig:
    warmup_calls: int = 3
    min_reps: int = 10
    max_reps: int = 100
    max_wall_s: float = 30.0  # stop sampling here once min_reps are in (the guard that bounds GPU time)
    cold_l2: bool = True
    sync_every: int = 8  # reps between reads of the events (at most two such batches are in flight)
    shuffle_seed: int | None = None  # None: contestants in the given order each rep; else a seeded shuffle per rep
    # None: every contestant runs every rep. Else, from `min_reps` on, a baseline whose median is more than this many
    # times the fastest baseline's leaves the rotation (keeping its samples and its re-check): it cannot be the best
    # baseline, and its calls would only spend the time guard (one 20x slower baseline can take most of a bench's
    # sampling time). The candidate and every baseline that could be best run every rep.
    retire_ratio: float | None = None


# ---- results -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Samples:
    """One contestant's outcome at one shape. `times_ms` is empty when it was not timed; `failure` says why."""

    name: str
    candidate: bool
    times_ms: tuple[float, ...] = ()
    failure: str | None = None  # failed the check before timing, or the re-check after it

    @property
    def ok(self) -> bool:
        return self.failure is None and bool(self.times_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    def quantile_ms(self, q: float) -> float:
        ordered = sorted(self.times_ms)
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


Check = Callable[[tuple[Any, ...], tuple[Tensor, ...]], str | None]  # (inputs, outputs) -> failure or None


def _outputs(result: Any) -> tuple[Tensor, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def measure(contestants: Sequence[Contestant], input_sets: Sequence[tuple[Any, ...]], clock: Clock,
            check: Check, config: TimingConfig = TimingConfig()) -> tuple[Samples, ...]:
    """Run the protocol (module docstring) and return one `Samples` per contestant, in order."""
    for c in contestants:
        if c.candidate and (c.verification is None or not c.verification.passed):
            why = "no verification" if c.verification is None else f"{c.verification.source}: {c.verification.detail}"
            raise Unverified(f"`{c.name}` has not passed the contract gates ({why}); it will not be timed")
    if not input_sets:
        raise ValueError("the protocol needs at least one input set")
    prepared = [[c.prepare(*inputs) for inputs in input_sets] for c in contestants]
    failures: list[str | None] = [None] * len(contestants)
    last: list[list[Any]] = [[None] * len(input_sets) for _ in contestants]
    for ci, c in enumerate(contestants):
        for si, inputs in enumerate(input_sets):
            out = _outputs(c.run(*prepared[ci][si]))
            clock.synchronize()
            reason = check(inputs, out)
            if reason is not None:
                failures[ci] = f"wrong before timing (input set {si}): {reason}"
                break
    live = [i for i in range(len(contestants)) if failures[i] is None]
    for _ in range(config.warmup_calls):  # not synchronized: the first timed call queues behind these
        for ci in live:
            contestants[ci].run(*prepared[ci][0])

    times: list[list[float]] = [[] for _ in contestants]
    queued: list[tuple[int, object, object]] = []  # marks of the reps since the last read
    in_flight: list[tuple[int, object, object]] = []  # the batch before them, read at the next read

    def collect(marks: list[tuple[int, object, object]]) -> None:
        for ci, start, end in marks:
            times[ci].append(clock.elapsed_ms(start, end))

    started = clock.wall_s()
    rep = 0
    order_rng = None if config.shuffle_seed is None else random.Random(f"cake-timing-order:{config.shuffle_seed}")
    rotation = list(live)  # who is sampled; retired baselines leave it, and are still re-checked below
    while rotation and rep < config.max_reps:
        si = rep % len(input_sets)
        order = list(rotation)
        if order_rng is not None:
            order_rng.shuffle(order)
        for ci in order:  # every contestant once per rep, same input set
            if config.cold_l2:
                clock.flush_l2()
            start = clock.record()
            last[ci][si] = contestants[ci].run(*prepared[ci][si])
            end = clock.record()
            queued.append((ci, start, end))
        rep += 1
        if rep % config.sync_every == 0:
            # Wait for the previous batch only: the one just queued keeps the device busy while the host reads
            # and queues the next, so no timed call starts on an idle GPU.
            if in_flight:
                clock.wait(in_flight[-1][2])
                collect(in_flight)
            in_flight, queued = queued, []
            if rep >= config.min_reps and clock.wall_s() - started > config.max_wall_s:
                break
            if config.retire_ratio is not None:
                retired = _retired(contestants, times, rotation, config.retire_ratio, config.min_reps)
                rotation = [ci for ci in rotation if ci not in retired]
    clock.synchronize()
    collect(in_flight + queued)

    for ci in live:
        for si, inputs in enumerate(input_sets):
            if last[ci][si] is None:
                continue
            reason = check(inputs, _outputs(last[ci][si]))
            if reason is not None:
                failures[ci] = f"wrong after timing (input set {si}): {reason}"
                break
    return tuple(Samples(c.name, c.candidate, tuple(times[i]) if failures[i] is None else (), failures[i])
                 for i, c in enumerate(contestants))


def _retired(contestants: Sequence[Contestant], times: Sequence[Sequence[float]], rotation: Sequence[int],
             ratio: float, min_reps: int) -> set[int]:
    """The baselines in the rotation whose median over at least `min_reps` read samples is more than `ratio` x the
    fastest such baseline's."""
    medians = {ci: statistics.median(times[ci]) for ci in rotation
               if not contestants[ci].candidate and len(times[ci]) >= min_reps}
    if not medians:
        return set()
    fastest = min(medians.values())
    return {ci for ci, median in medians.items() if median > ratio * fastest}


# ---- inputs --------------------------------------------------------------------------------------------------


def input_set_bytes(contract: Contract, dims: Mapping[str, int], dtype: torch.dtype) -> int:
    total = 0
    for spec in contract.inputs:
        elem = torch.empty((), dtype=contract.input_dtype(spec, dtype)).element_size()
        total += math.prod(shape_of(spec, dims)) * elem
    return total


def pool_size(set_bytes: int, l2_bytes: int, max_pool_bytes: int = 4 << 30, min_sets: int = 2,
              max_sets: int = 8) -> int:
    """Input sets to rotate: enough that the pool holds over twice the L2, within a memory budget."""
    want = max(min_sets, math.ceil(L2_FLUSH_MULTIPLE * l2_bytes / max(1, set_bytes)) + 1)
    afford = max(min_sets, max_pool_bytes // max(1, set_bytes))
    return max(min_sets, min(want, afford, max_sets))


def make_inputs(contract: Contract, dims: Mapping[str, int], dtype: torch.dtype, device: str,
                seed: int) -> tuple[Tensor | None, ...]:
    """One fresh input set for timing: randn floats (projected into the input's value domain) and in-range
    integers, drawn on the device (never zeros: zeros hide unwritten outputs and can run faster than real
    data). Optional inputs are omitted (None), as a plain call omits them; a workload timing them builds its
    own inputs (e.g. varlen offsets for a benchmark's sequence lengths)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dims = contract.resolve_dims(dims, contract.optional_inputs)
    out: list[Tensor | None] = []
    for spec in contract.inputs:
        if spec.optional:
            out.append(None)
            continue
        shape = shape_of(spec, dims)
        t = contract.input_dtype(spec, dtype)
        if t.is_floating_point:
            x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
            out.append((x if spec.domain is None else spec.domain.project(x)).to(t))
        else:
            high = dims[spec.int_range_dim] if spec.int_range_dim else 2**15
            out.append(torch.randint(0, max(1, high), shape, generator=gen, device=device, dtype=t))
    return tuple(out)


# ---- the re-check at large shapes --------------------------------------------------------------------------


def spot_check(contract: Contract, dtype: torch.dtype, sample: Mapping[str, int], seed: int = 0) -> Check:
    """A `Check` comparing outputs to the fp64 reference on a seeded sample of indices along dims on which
    the outputs are independent (`sample`: dim -> how many), so a shape whose full fp64 reference would not
    fit in memory is still checked exactly where it is checked. Dims not in `sample` are kept whole.

    The protocol checks every contestant on every input set before and after timing, 4 x sets calls with two
    contestants, on the same few input tuples: the reference depends only on the inputs and the sampled dims, so
    it is computed once per input tuple (the same object) and sample, and reused (a KDA spot check's fp64 token
    loop costs about 1.5 s on the host at T = 8192)."""
    known: list[tuple[tuple[Any, ...], tuple[tuple[str, int], ...], Expected]] = []

    def reference(inputs: tuple[Any, ...], key: tuple[tuple[str, int], ...], case: Case,
                  sub_in: tuple[Tensor | None, ...]) -> Expected:
        for seen, seen_key, expected in known:
            if seen is inputs and seen_key == key:
                return expected
        expected = expected_from(contract, case, to_reference_inputs(sub_in),
                                 [None if t is None else t.dtype for t in sub_in])
        known.append((inputs, key, expected))
        return expected

    def check(inputs: tuple[Any, ...], outputs: tuple[Tensor, ...]) -> str | None:
        dims = {d.name: 0 for d in contract.dims}
        for spec, t in zip(contract.inputs + contract.outputs, (*inputs, *outputs), strict=True):
            if t is None:  # an omitted optional input
                continue
            for name, size in zip(spec.dims, t.shape, strict=True):
                if name in dims:  # not a derived dim such as `N+1`
                    dims[name] = int(size)
        gen = torch.Generator().manual_seed(seed)
        picks = {name: torch.randperm(dims[name], generator=gen)[: min(count, dims[name])].sort().values
                 for name, count in sample.items() if name in dims}

        def take(spec_dims: tuple[str, ...], t: Tensor | None) -> Tensor | None:
            if t is None:
                return None
            for axis, name in enumerate(spec_dims):
                if name in picks:
                    t = t.index_select(axis, picks[name].to(t.device))
            return t.detach().cpu()

        sub_in = tuple(take(s.dims, t) for s, t in zip(contract.inputs, inputs, strict=True))
        sub_out = tuple(take(s.dims, t) for s, t in zip(contract.outputs, outputs, strict=True))
        sub_dims = {**dims, **{name: len(idx) for name, idx in picks.items()}}
        omitted = tuple(s.name for s, t in zip(contract.inputs, inputs, strict=True) if t is None)
        case = make_case(sub_dims, dtype, ValueFamily.RANDN, Layout.CONTIGUOUS, seed, "TIMING", 0, omitted)
        expected = reference(inputs, tuple(sorted(sub_dims.items())), case, sub_in)
        result = compare(contract, case, sub_in, sub_out, expected=expected)  # type: ignore[arg-type]
        return None if result.ok else result.reason

    return check


# ---- the report ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Measurement:
    """One contestant at one shape, with everything a table shows. Times in ms; None when not timed."""

    name: str
    candidate: bool
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    reps: int
    tflops: float | None
    gbytes_per_s: float | None
    frac_gemm_ceiling: float | None  # of DeviceSpec.gemm_ceiling_tflops (measured when we have it)
    frac_bandwidth_ceiling: float | None
    floor_ms: float  # roofline floor at datasheet peaks (what `implausible` is judged against)
    implausible: bool
    failure: str | None
    speedup: float | None = None  # reference median / this median (for candidates)
    extra: dict[str, object] = field(default_factory=dict)
    times_ms: tuple[float, ...] = ()  # every sample, in rep order (a headline is re-derived from these)

    def to_json(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in (
            "name", "candidate", "median_ms", "p10_ms", "p90_ms", "reps", "tflops", "gbytes_per_s",
            "frac_gemm_ceiling", "frac_bandwidth_ceiling", "floor_ms", "implausible", "failure", "speedup", "extra",
            "times_ms")}


def summarize(samples: Samples, contract: Contract, dims: Mapping[str, int], dtype: torch.dtype,
              device: DeviceSpec, reference_ms: float | None = None, work_scale: float = 1.0) -> Measurement:
    """Rates and flags for one contestant. `work_scale` multiplies the contract's flops and bytes (a pipeline
    running several ops per call); `reference_ms` is what the speedup divides (the best baseline's median)."""
    floor_s = roofline_floor_s(contract, dims, dtype, device) * work_scale
    if not samples.ok:
        return Measurement(samples.name, samples.candidate, None, None, None, 0, None, None, None, None,
                           floor_s * 1e3, False, samples.failure or "not timed")
    med = samples.median_ms
    secs = med * 1e-3
    flops = contract.flops(dims) * work_scale
    nbytes = contract.bytes(dims, dtype) * work_scale
    tflops = flops / secs / 1e12
    gbps = nbytes / secs / 1e9
    return Measurement(
        samples.name, samples.candidate, med, samples.quantile_ms(0.1), samples.quantile_ms(0.9),
        len(samples.times_ms), tflops, gbps, tflops / device.gemm_ceiling_tflops,
        gbps * 1e9 / device.bandwidth_ceiling_bytes_per_s, floor_s * 1e3,
        implausible_speed(contract, dims, dtype, secs / work_scale, device), None,
        (reference_ms / med) if reference_ms is not None else None, times_ms=tuple(samples.times_ms))
