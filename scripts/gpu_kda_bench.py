"""Time fla's `chunk_kda` (fused flags), other KDA baselines (FlashKDA) and a CAKE KDA schedule at FlashKDA's six
shapes, interleaved in one process with the verifier's timing protocol (cold L2, rotated input sets, device
events, medians, fp64 spot checks before and after timing), and write JSON:

    python3 scripts/gpu_kda_bench.py --json OUT.json --seed-verdict VERIFY.json [...] [--schedule FILE.cake [...]]
        [--params '{"C": 32}'] [--shapes h64_fixed ...] [--max-seconds 25] [--baselines fla_chunk_kda flash_kda]

`--baselines` names the workload's baselines to time (default: fla_chunk_kda alone); one that cannot load here
(its package missing, no GPU) is listed under `notes` with the reason, printed, and not timed. The schedule's
speedup is over the fastest baseline at each shape; `baseline_geomean` gives each baseline's geomean speedup over
the first one named (FlashKDA over fla).

The schedule defaults to the chunk-parallel seed (kda_fused_chunkpar.cake); `--params` binds its params (JSON,
as `cake verify` and the lowering take them), defaults otherwise. `--dry-run` does everything but time (no GPU:
the schedule is lowered with its params, the verdict read, the contestants and shapes listed, the JSON written),
so a typo fails on a CPU, not in the GPU session.

Several `--schedule` files are timed side by side in the same process (one `--seed-verdict` each, in the same
order): candidates compared under one protocol, each against the same baseline calls.
The seed is timed only when `--seed-verdict` (the JSON of `cake verify --schedule ... --device cuda`) says
it passed the contract gates; otherwise it is reported as not timed, with the reason. Inputs follow the
benchmark: bf16 q, k, v, raw gate g and beta logits, A_log = log U(1, 16) and dt_bias ~ N(0, 1) in fp32, no
initial state; the varlen shapes pass `cu_seqlens` of their sequence lengths (shapes.SEQUENCE_LENGTHS).
`run_shapes` takes the clock and the contestants as parameters, so its logic runs on a CPU in the tests.

Bounded time (session 5's first run spent its whole 230 s stage on one shape): inputs are drawn on the device
(800 MB per set at H = 96: a CPU draw took tens of seconds); the fp64 spot check before and after timing judges
one seeded sequence at SPOT_HEADS seeded heads (o over that sequence's tokens and its final state: the
reference is a token loop on the host, and one head of one sequence is what a timed kernel can get wrong
without failing it everywhere); every shape runs under `--max-seconds` of wall time (SIGALRM), past which it is
reported as cut and the next shape starts; the JSON is rewritten after each shape, so a stage cut short keeps
the shapes it finished. The spot check is no verdict: the gates (`cake verify`, `--seed-verdict`) are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from cake.experiments.kda import shapes as kda_shapes
from cake.experiments.kda.baselines import FLA_CHUNK, FORWARD_BASELINES
from cake.experiments.kda.reference import segments
from cake.experiments.workload import Shape
from cake.verifier.compare import compare
from cake.verifier.contracts import Contract, get_contract
from cake.verifier.inputs import Layout, ValueFamily, make_case
from cake.verifier.timing import Check, Clock, Contestant, TimingConfig, Verification, measure

from cake.stats import geomean

OP = "kda_forward"
BASELINES = {b.name: b for b in FORWARD_BASELINES}
SEED_SCHEDULE = Path(__file__).resolve().parents[1] / "experiments" / "kda" / "kda_fused_chunkpar.cake"
CONFIG = TimingConfig(warmup_calls=3, min_reps=10, max_reps=40, max_wall_s=3.0)
# One input set per shape (805 MB at H=96, far past the L2; every call starts cold anyway): the fp64 spot
# check, a token-by-token loop on the host over one sequence and SPOT_HEADS heads, runs before and after timing
# for each set and contestant.
POOL = 1
SPOT_HEADS = 1
MAX_SECONDS = 25.0  # per shape: compiles (first shape), input draw, 4 spot checks, timing (CONFIG.max_wall_s)


class ShapeCut(Exception):
    """A shape ran past its wall-clock guard."""


@contextmanager
def wall_guard(seconds: float) -> Iterator[None]:
    """Raise ShapeCut in this (main) thread once `seconds` of wall time have passed; no guard when <= 0 or
    where SIGALRM does not exist. A CUDA call in flight finishes first: the alarm lands between Python lines."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def cut(signum: int, frame: object) -> None:
        raise ShapeCut(f"cut at its {seconds:g} s guard")

    previous = signal.signal(signal.SIGALRM, cut)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def shape_inputs(shape: Shape, device: str, seed: int) -> tuple[Any, ...]:
    """One input set in kda_forward's signature, drawn on `device` from `seed` (a device's generator: the same
    seed gives the same inputs on the same kind of device)."""
    d = shape.dim_map
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = shape.torch_dtype
    b, t, h, k, v = d["B"], d["T"], d["H"], d["K"], d["V"]

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=gen, device=device)

    lengths = kda_shapes.SEQUENCE_LENGTHS.get(shape.name)
    cu = None if lengths is None else torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    a_log = torch.empty(h, device=device).uniform_(1.0, 16.0, generator=gen).log()
    dt_bias = randn(h, k).clamp(-4.0, 4.0)
    tensors = [randn(b, t, h, k), randn(b, t, h, k), randn(b, t, h, v), randn(b, t, h, k), randn(b, t, h)]
    out: list[Any] = [x.to(dtype) for x in tensors]
    out += [a_log, dt_bias, None, None if cu is None else cu.to(device)]
    return tuple(out)


def sequence_spot_check(contract: Contract, dtype: torch.dtype, heads: int, seed: int) -> Check:
    """A `Check` judging, against the fp64 reference on the host, one seeded non-empty sequence (a batch row,
    or a `cu_seqlens` segment) at `heads` seeded heads: o over that sequence's tokens and its final state,
    with the contract's tolerance (the sequence alone is a dense B = 1 case: it starts from its own initial
    state, which the contract says every sequence does)."""

    def check(inputs: tuple[Any, ...], outputs: tuple[torch.Tensor, ...]) -> str | None:
        q, k, v, g, beta, a_log, dt_bias, h0, cu = inputs
        o, state = outputs
        batch, total, n_heads, dk = q.shape
        gen = torch.Generator().manual_seed(seed)
        pick = torch.randperm(n_heads, generator=gen)[: min(heads, n_heads)].sort().values
        sequences = [(n, b, bos, eos) for n, (b, bos, eos) in enumerate(segments(batch, total, cu)) if eos > bos]
        if not sequences:
            return None
        n, b, bos, eos = sequences[int(torch.randint(len(sequences), (1,), generator=gen))]

        def tokens(x: torch.Tensor) -> torch.Tensor:
            return x[b : b + 1, bos:eos].index_select(2, pick.to(x.device)).cpu()

        def per_head(x: torch.Tensor, axis: int) -> torch.Tensor:
            return x.index_select(axis, pick.to(x.device)).cpu()

        sub_in = (*(tokens(x) for x in (q, k, v, g, beta)), per_head(a_log, 0), per_head(dt_bias, 0),
                  None if h0 is None else per_head(h0[n : n + 1], 1), None)
        sub_out = (tokens(o), per_head(state[n : n + 1], 1))
        dims = {"B": 1, "T": eos - bos, "H": len(pick), "K": dk, "V": v.shape[-1], "N": 1}
        omitted = ("cu_seqlens",) if h0 is not None else ("initial_state", "cu_seqlens")
        case = make_case(dims, dtype, ValueFamily.RANDN, Layout.CONTIGUOUS, seed, "TIMING", 0, omitted)
        result = compare(contract, case, sub_in, sub_out)  # type: ignore[arg-type]
        where = f"sequence {n} (tokens {bos}..{eos}), heads {pick.tolist()}"
        return None if result.ok else f"{result.reason} [{where}]"

    return check


def run_shapes(shapes: Sequence[Shape], contestants: Sequence[Contestant], clock: Clock, device: str, *,
               pool: int = POOL, config: TimingConfig = CONFIG, seed: int = 0, max_seconds: float = 0.0,
               on_shape: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """Per shape: each contestant's median (or why it has none) and candidates' speedups over the fastest
    baseline; a shape past `max_seconds` of wall time (0: no guard) is reported as cut, with no timings.
    `on_shape` sees the reports so far after each shape (the caller writes them out)."""
    contract = get_contract(OP)
    reports: list[dict[str, Any]] = []
    for shape in shapes:
        started = time.monotonic()
        sets = [shape_inputs(shape, device, seed + i) for i in range(pool)]
        # Compiles and autotuning (fla tunes per H and per varlen-ness) happen in this first call, outside the
        # guard: a guard that fires inside Triton's compiler could leave its caches half-written.
        first_call_s = {c.name: _first_call_s(c, sets[0], clock) for c in contestants}
        try:
            with wall_guard(max_seconds):
                reports.append(_time_shape(shape, contract, contestants, clock, sets, config, seed))
        except ShapeCut as cut:
            reports.append({"shape": shape.to_json(), "sequence_lengths": kda_shapes.SEQUENCE_LENGTHS.get(shape.name),
                            "cut": str(cut), "measurements": []})
            print(f"{shape.name:22} {cut}", flush=True)
        reports[-1]["first_call_s"] = first_call_s
        reports[-1]["wall_s"] = round(time.monotonic() - started, 2)
        if on_shape is not None:
            on_shape(reports)
    return reports


def _first_call_s(contestant: Contestant, inputs: tuple[Any, ...], clock: Clock) -> float:
    """Wall seconds of one untimed call (the compile, the autotuning); its outputs are judged by `measure`'s
    checks, on the calls after it."""
    started = time.monotonic()
    contestant.run(*contestant.prepare(*inputs))
    clock.synchronize()
    return round(time.monotonic() - started, 2)


def _time_shape(shape: Shape, contract: Contract, contestants: Sequence[Contestant], clock: Clock,
                sets: list[tuple[Any, ...]], config: TimingConfig, seed: int) -> dict[str, Any]:
    check = sequence_spot_check(contract, shape.torch_dtype, SPOT_HEADS, seed)
    samples = measure(contestants, sets, clock, check, config)
    baselines = [s.median_ms for s in samples if not s.candidate and s.ok]
    best = min(baselines) if baselines else None
    rows = []
    for s in samples:
        median = s.median_ms if s.ok else None
        rows.append({"name": s.name, "candidate": s.candidate, "median_ms": median,
                     "p10_ms": s.quantile_ms(0.1) if s.ok else None, "p90_ms": s.quantile_ms(0.9) if s.ok else None,
                     "reps": len(s.times_ms), "failure": s.failure,
                     "speedup": best / median if s.candidate and best and median else None})
    for row in rows:
        print(f"{shape.name:22} {row['name']:24} "
              + (f"{row['median_ms']:.3f} ms" if row["median_ms"] is not None else f"not timed: {row['failure']}")
              + (f"  speedup {row['speedup']:.3f}x" if row["speedup"] else ""), flush=True)
    return {"shape": shape.to_json(), "sequence_lengths": kda_shapes.SEQUENCE_LENGTHS.get(shape.name),
            "measurements": rows}


def geomean_speedup(reports: Sequence[dict[str, Any]], name: str) -> float | None:
    """The geomean of `name`'s speedups over every shape; None when any shape (a cut one too) has none."""
    found = [next((m["speedup"] for m in r["measurements"] if m["name"] == name), None) for r in reports]
    ratios = [float(r) for r in found if r is not None]
    if not ratios or len(ratios) != len(found):
        return None
    return geomean(ratios)


def baseline_geomean(reports: Sequence[dict[str, Any]], over: str, name: str) -> float | None:
    """The geomean over every shape of `over`'s median / `name`'s median (how much faster `name` is than `over`);
    None when any shape lacks either median."""
    ratios = []
    for report in reports:
        medians = {m["name"]: m["median_ms"] for m in report["measurements"]}
        if not medians.get(over) or not medians.get(name):
            return None
        ratios.append(medians[over] / medians[name])
    return geomean(ratios) if ratios else None


def seed_verification(path: Path | None, schedule: Path | None = None, params: str | None = None) -> Verification:
    """The schedule's verdict: `cake verify --json` of one seed (a Verdict) or of `--seeds` (every seed's). With
    `schedule`, a verdict that names its kernel (cake verify writes the file's sha256 and the params) counts only
    for that file with those params; one written before verdicts named their kernel is taken as the script pairs
    it, and its detail says so."""
    if path is None or not path.is_file():
        return Verification(False, "none", f"no verdict at {path}")
    from cake.verifier.multiseed import SeededVerdicts
    from cake.verifier.results import Verdict

    text = path.read_text()
    data = json.loads(text)
    if schedule is not None and (other := _another_kernel(data.get("kernel"), schedule, params)):
        return Verification(False, "battery", f"the verdict at {path} is of {other}")
    unpinned = "" if schedule is None or "kernel" in data else " (the verdict does not name its kernel)"
    if "verdicts" in data:
        seeded = SeededVerdicts.from_json(text)
        return Verification(seeded.passed, "battery", seeded.summary() + unpinned)
    verdict = Verdict.from_json(text)
    failed = ", ".join(g.gate_id for g in verdict.failures)
    return Verification(verdict.passed, "battery",
                        ("all gates passed" if verdict.passed else f"failed {failed}") + unpinned)


def _another_kernel(kernel: dict[str, Any] | None, schedule: Path, params: str | None) -> str | None:
    """What else a verdict's kernel is, when it is not `schedule` with `params`; None when it is (or is unnamed)."""
    if kernel is None:
        return None
    if "sha256" not in kernel:
        return f"another kernel ({kernel.get('kernel')})"
    digest = hashlib.sha256(schedule.read_bytes()).hexdigest()
    if kernel["sha256"] != digest:
        return f"another schedule ({kernel.get('schedule')}, sha256 {kernel['sha256'][:12]}; {schedule}: {digest[:12]})"
    verified = json.loads(dict(kernel.get("options") or {}).get("params") or "{}")
    if verified != json.loads(params or "{}"):
        return f"{schedule} with params {verified or 'at their defaults'}, not {json.loads(params or '{}') or 'the defaults'}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu_kda_bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--seed-verdict", type=Path, nargs="+", default=[],
                        help="`cake verify --json` of each schedule on this GPU, in --schedule's order")
    parser.add_argument("--schedule", type=Path, nargs="+", default=[SEED_SCHEDULE])
    parser.add_argument("--params", help="JSON object binding the schedule's params (default: their defaults)")
    parser.add_argument("--shapes", nargs="+", default=[s.name for s in kda_shapes.GPU_SHAPES],
                        choices=[s.name for s in kda_shapes.GPU_SHAPES])
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS,
                        help=f"wall-clock guard per shape (default {MAX_SECONDS:g}; 0: none); a shape past it is cut")
    parser.add_argument("--baselines", nargs="+", default=[FLA_CHUNK.name], choices=list(BASELINES),
                        help=f"baselines to time (default {FLA_CHUNK.name}); speedups are over the fastest")
    parser.add_argument("--dry-run", action="store_true", help="lower and list, time nothing (runs on a CPU)")
    args = parser.parse_args(argv)

    from cake.experiments.kda.adapt import load_schedule
    from cake.experiments.workload import BaselineUnavailable
    from cake.verifier.timing import CudaClock

    by_name = {s.name: s for s in kda_shapes.GPU_SHAPES}
    shapes = [by_name[name] for name in args.shapes]
    contestants: list[Contestant] = []
    notes: dict[str, str] = {}
    for name in args.baselines:
        try:
            loaded = BASELINES[name].load()
            contestants.append(Contestant(name, loaded.run, loaded.prepared, candidate=False))
        except BaselineUnavailable as missing:
            notes[name] = f"not timed: {missing}"
    if args.seed_verdict and len(args.seed_verdict) != len(args.schedule):
        parser.error(f"{len(args.schedule)} schedules and {len(args.seed_verdict)} verdicts: give one verdict each")
    verifications = []
    for index, schedule in enumerate(args.schedule):
        verification = seed_verification(args.seed_verdict[index] if args.seed_verdict else None, schedule,
                                         args.params)
        verifications.append(verification.detail)
        # Lowered before the verdict is consulted, so bad params or a refused schedule fail here, in a dry run too.
        kernel = load_schedule(schedule, params=args.params)
        if verification.passed:
            contestants.append(Contestant(schedule.stem, kernel, verification=verification))
        else:
            notes[schedule.stem] = f"not timed: {verification.detail}"
    for name, why in notes.items():
        print(f"{name}: {why}", flush=True)
    versions = {"torch": torch.__version__, "device": "none (dry run)" if args.dry_run else torch.cuda.get_device_name()}
    for module in ("triton", "fla"):
        try:
            versions[module] = str(__import__(module).__version__)
        except ImportError:
            versions[module] = "not installed"

    def write(reports: list[dict[str, Any]]) -> None:
        data = {"op": OP, "protocol": "verifier.timing.measure: interleaved, cold L2, CUDA events, medians; fp64 spot "
                                      f"check of one sequence at {SPOT_HEADS} head(s) before and after timing",
                "config": {"input_sets": POOL, "warmup_calls": CONFIG.warmup_calls, "min_reps": CONFIG.min_reps,
                           "max_reps": CONFIG.max_reps, "max_wall_s": CONFIG.max_wall_s, "max_seconds_per_shape": args.max_seconds},
                "versions": versions, "schedule": str(args.schedule[0]),
                "schedules": [str(path) for path in args.schedule], "params": args.params, "dry_run": args.dry_run,
                "contestants": [c.name for c in contestants], "notes": notes,
                "seed_verification": verifications[0] if len(verifications) == 1 else verifications,
                "shapes": reports, "shapes_asked": args.shapes,
                "geomean_speedup": {c.name: geomean_speedup(reports, c.name) if len(reports) == len(shapes) else None
                                    for c in contestants if c.candidate},
                "baseline_geomean": {"over": args.baselines[0], **{
                    name: baseline_geomean(reports, args.baselines[0], name) if len(reports) == len(shapes) else None
                    for name in args.baselines[1:]}}}
        args.json.write_text(json.dumps(data, indent=2) + "\n")

    reports: list[dict[str, Any]] = []
    if args.dry_run:
        print(f"dry run: would time {[c.name for c in contestants]} at {[s.name for s in shapes]}", flush=True)
    elif contestants:
        reports = run_shapes(shapes, contestants, CudaClock(), "cuda", max_seconds=args.max_seconds, on_shape=write)
    write(reports)
    written = json.loads(args.json.read_text())
    print(f"wrote {args.json}; geomean speedup over the fastest baseline: {written['geomean_speedup']}; "
          f"baselines over {args.baselines[0]}: {written['baseline_geomean']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
