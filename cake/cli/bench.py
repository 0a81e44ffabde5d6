"""`cake bench`: time a verified kernel against its baselines with the timing protocol.

    cake bench --op kmeans_assign --schedule assign.cake [--baseline flash_kmeans] [--shapes cake_cell] [--json OUT]
    cake bench --op kmeans_assign --kernel my_kernels.py:assign --shapes B=32,N=65536,K=1024,D=128:bf16

The kernel must first pass the contract gates on the GPU for every dtype it is timed at (the verdict is
read from the verdict cache when present, else the battery runs in an isolated worker); at each shape its
outputs are checked against the fp64 reference (on a sample) before timing and again after. A kernel that
fails either way is refused: it gets no time. Exit 0 when every shape was timed and plausible; 1 when the
kernel was refused, wrong at a shape, or implausibly fast; 2 on bad usage or with no GPU (nothing is timed
on a CPU — there are no fake timings).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cake.cli.common import ExitCode, UsageError

if TYPE_CHECKING:
    from cake.arch import DeviceSpec
    from cake.experiments.workload import OpSpec, Prepared, Shape
    from cake.verifier.timing import Clock, Measurement, Samples, TimingConfig, Verification

DEFAULT_VERIFY_TIMEOUT_S = 600.0
NO_GPU = "cake bench: no CUDA device here; timings are taken only on a GPU (nothing was timed)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="time a verified kernel against baselines (GPU only)")
    parser.add_argument("--op", help="the op contract; read from the schedule with --schedule")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--kernel", metavar="PATH.py:FUNC", help="a Python callable taking the op's inputs")
    source.add_argument("--schedule", metavar="FILE.cake", help="a CAKE schedule, lowered and loaded")
    parser.add_argument("--baseline", action="append", metavar="NAME",
                        help="baseline(s) to interleave with (default: all of the op's baselines)")
    parser.add_argument("--shapes", nargs="+", metavar="SHAPE",
                        help="shape names of the op's domain or B=32,N=65536,...[:bf16] (default: the whole domain)")
    parser.add_argument("--reps", type=int, default=100, help="timed calls per contestant per shape, at most")
    parser.add_argument("--max-seconds", type=float, default=30.0, help="wall-clock guard per shape")
    parser.add_argument("--seed", type=int, default=0, help="seed of the gates (and of the timing inputs)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_VERIFY_TIMEOUT_S, metavar="S",
                        help="seconds per gate for the verification battery")
    parser.add_argument("--no-cache", action="store_true", help="re-run the gates even if a verdict is cached")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every measurement as JSON")
    parser.set_defaults(run=run)


# ---- the glue the CLI and the GPU scripts share --------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ShapeReport:
    shape: Shape
    measurements: tuple[Measurement, ...]
    unavailable: tuple[tuple[str, str], ...]  # baselines that could not run: (name, why)

    @property
    def candidate(self) -> Measurement | None:
        return next((m for m in self.measurements if m.candidate), None)

    def to_json(self) -> dict[str, object]:
        return {"shape": self.shape.to_json(), "measurements": [m.to_json() for m in self.measurements],
                "unavailable": dict(self.unavailable)}


def load_baselines(spec: OpSpec, names: Sequence[str] | None) -> tuple[list[tuple[str, Prepared]], list[tuple[str, str]]]:
    from cake.experiments.workload import BaselineUnavailable

    chosen = [spec.baseline(n) for n in names] if names else list(spec.baselines)
    ready, missing = [], []
    for baseline in chosen:
        try:
            ready.append((baseline.name, baseline.load()))
        except BaselineUnavailable as why:
            missing.append((baseline.name, str(why)))
    return ready, missing


def bench_shape(spec: OpSpec, shape: Shape, candidates: Sequence[tuple[str, Callable[..., Any], Verification]],
                baselines: Sequence[tuple[str, Prepared]], clock: Clock, config: TimingConfig, device_spec: DeviceSpec,
                *, device: str = "cuda", seed: int = 0, pool: int | None = None,
                unavailable: Sequence[tuple[str, str]] = ()) -> ShapeReport:
    """Time `candidates` interleaved with `baselines` at `shape`; speedups are against the fastest baseline."""
    from cake.stats import speedup_over_best
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import (
        Contestant,
        input_set_bytes,
        make_inputs,
        measure,
        pool_size,
        spot_check,
        summarize,
    )

    contract = get_contract(spec.contract)
    dims, dtype = shape.dim_map, shape.torch_dtype
    n_sets = pool or pool_size(input_set_bytes(contract, dims, dtype), device_spec.l2_bytes)
    sets = [make_inputs(contract, dims, dtype, device, seed + i) for i in range(n_sets)]
    contestants = [Contestant(name, fn, verification=v) for name, fn, v in candidates]
    contestants += [Contestant(name, p.run, p.prepared, candidate=False) for name, p in baselines]
    samples = measure(contestants, sets, clock, spot_check(contract, dtype, dict(spec.spot_sample), seed), config)
    against, baseline_ms, problems = speedup_inputs(spec, samples, unavailable)
    measurements = []
    for s in samples:
        if not s.candidate:
            measurements.append(summarize(s, contract, dims, dtype, device_spec))
            continue
        speedup = speedup_over_best(s.median_ms if s.ok else None, baseline_ms, against,
                                    candidate_problem=s.failure, problems=problems)
        best = baseline_ms[speedup.best_baseline] if speedup.best_baseline else None
        m = summarize(s, contract, dims, dtype, device_spec, best)
        measurements.append(replace(m, extra={**m.extra, "speedup": speedup.to_json()}))
    return ShapeReport(shape, tuple(measurements), tuple(unavailable))


def speedup_inputs(spec: OpSpec, samples: Sequence[Samples], unavailable: Sequence[tuple[str, str]]
                   ) -> tuple[list[str], dict[str, float | None], dict[str, str]]:
    """(the baselines a speedup is over, their medians, why each one without a time has none). A workload's
    references are timed alongside but are not baselines; a baseline that could not load or failed its check
    stays among them without a time, so the speedup is undefined rather than over the others."""
    def is_reference(name: str) -> bool:
        try:
            return spec.baseline(name).reference
        except KeyError:
            return False

    against = [s.name for s in samples if not s.candidate and not is_reference(s.name)]
    against += [name for name, _ in unavailable if name not in against and not is_reference(name)
                and any(b.name == name for b in spec.baselines)]
    baseline_ms = {s.name: (s.median_ms if s.ok else None) for s in samples if not s.candidate}
    problems = {s.name: s.failure or "not timed" for s in samples if not s.candidate and not s.ok}
    problems.update({name: f"not available: {why}" for name, why in unavailable})
    return against, baseline_ms, problems


def verdict_verification(verdict: Any) -> Verification:
    from cake.verifier.timing import Verification

    if verdict.passed:
        return Verification(True, "battery", f"{len(verdict.gates)} gates, none failed")
    failed = ", ".join(f"{g.gate_id} ({g.status.value})" for g in verdict.failures)
    return Verification(False, "battery", f"failed: {failed}")


# ---- the command ------------------------------------------------------------------------------------------------

def _resolve_shapes(spec: OpSpec, texts: Sequence[str] | None) -> list[Shape]:
    from cake.experiments.workload import parse_shape

    if not texts:
        return list(spec.gpu_shapes)
    try:
        return [parse_shape(t, spec.gpu_shapes, spec.gpu_shapes[0].dtype) for t in texts]
    except ValueError as error:
        raise UsageError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    from cake.cli.verify import check_op, resolve_kernel

    op, ref = resolve_kernel(args)
    check_op(op)
    from cake.experiments.workload import UnknownWorkloadError, workload_for_op

    try:
        spec = workload_for_op(op).op(op)
    except UnknownWorkloadError as error:
        raise UsageError(f"{error}; `cake bench` needs a workload with shapes and baselines for {op}") from None
    shapes = _resolve_shapes(spec, args.shapes)
    if args.baseline:
        for name in args.baseline:
            try:
                spec.baseline(name)
            except KeyError as error:
                raise UsageError(str(error.args[0])) from None

    import torch

    if not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return ExitCode.USAGE

    from cake.verifier.timing import CudaClock, TimingConfig, match_device
    from cake.verifier.worker import KernelLoadError, verify_in_worker
    from cake.verifier.worker_main import load_kernel

    clock = CudaClock()
    device_spec = clock.device_spec or match_device(clock.device_name)
    if device_spec is None:
        raise UsageError(f"`{clock.device_name}` is not in cake.arch's device table; add it to judge its ceilings")
    dtype_names = sorted({str(s.torch_dtype).removeprefix("torch.") for s in shapes})
    verifications = {}
    for dtype_name in dtype_names:
        try:
            verdict = verify_in_worker(op, ref, device="cuda", dtypes=[dtype_name], seed=args.seed, all_gates=False,
                                       timeout_s=args.timeout, use_cache=not args.no_cache)
        except KernelLoadError as error:
            raise UsageError(str(error)) from None
        verifications[dtype_name] = verdict_verification(verdict)
    refused = {d: v for d, v in verifications.items() if not v.passed}
    if refused:
        for dtype_name, v in refused.items():
            print(f"cake bench: refusing to time {ref.describe()} at {dtype_name}: it has not passed the contract "
                  f"gates ({v.detail}); run `cake verify` for the evidence", file=sys.stderr)
        return ExitCode.FINDINGS

    kernel = load_kernel(ref)
    if isinstance(kernel, str):
        raise UsageError(kernel)
    baselines, missing = load_baselines(spec, args.baseline)
    config = TimingConfig(max_reps=args.reps, min_reps=min(10, args.reps), max_wall_s=args.max_seconds)
    reports = []
    for shape in shapes:
        v = verifications[str(shape.torch_dtype).removeprefix("torch.")]
        reports.append(bench_shape(spec, shape, [("candidate", kernel, v)], baselines, clock, config, device_spec,
                                   seed=args.seed, unavailable=missing))
    print_reports(reports, title=f"{op} · {ref.describe()} · {clock.device_name}")
    if args.json is not None:
        payload = {"op": op, "kernel": ref.describe(), "device": clock.device_name,
                   "torch": torch.__version__, "shapes": [r.to_json() for r in reports]}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    bad = [r for r in reports if r.candidate is None or r.candidate.failure or r.candidate.implausible]
    return ExitCode.FINDINGS if bad else ExitCode.OK


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_reports(reports: Sequence[ShapeReport], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in ("shape", "kernel", "median ms", "p10-p90 ms", "TFLOP/s", "GB/s", "% GEMM ceil", "% BW ceil",
                   "floor ms", "speedup", "status"):
        table.add_column(column, overflow="fold")
    for report in reports:
        for m in report.measurements:
            status = m.failure or ("[bold red]IMPLAUSIBLE: below the roofline floor[/]" if m.implausible else "ok")
            speedup = m.extra.get("speedup")
            if isinstance(speedup, dict) and speedup.get("undefined"):
                status = f"{status}; speedup undefined: {speedup['undefined']}"
            spread = f"{_f(m.p10_ms, '.3f')}-{_f(m.p90_ms, '.3f')}" if m.median_ms is not None else "-"
            table.add_row(f"{report.shape.name} ({report.shape.describe()})", m.name, _f(m.median_ms, ".4f"), spread,
                          _f(m.tflops, ".1f"), _f(m.gbytes_per_s, ".0f"),
                          _f(None if m.frac_gemm_ceiling is None else 100 * m.frac_gemm_ceiling, ".1f"),
                          _f(None if m.frac_bandwidth_ceiling is None else 100 * m.frac_bandwidth_ceiling, ".1f"),
                          f"{m.floor_ms:.4f}", _f(m.speedup, ".3f"), status)
        for name, why in report.unavailable:
            table.add_row(report.shape.name, name, "-", "-", "-", "-", "-", "-", "-", "-", f"not available: {why}")
    console = Console(width=max(Console().width, 180))
    console.print(table)
