"""`cake bench`: time a verified kernel against its baselines with the timing protocol.

    cake bench --op kmeans_assign --schedule assign.cake [--baseline flash_kmeans] [--shapes cake_cell] [--json OUT]
    cake bench --op kmeans_assign --kernel my_kernels.py:assign --shapes B=32,N=65536,K=1024,D=128:bf16
    cake bench --pipeline lloyd_iteration [--step kmeans_assign=FILE.cake@cuda] [--step kmeans_update=FILE.cake]

The kernel must first pass the contract gates on the GPU for every dtype it is timed at (the verdict is
read from the verdict cache when present, else the battery runs in an isolated worker); at each shape its
outputs are checked against the fp64 reference (on a sample) before timing and again after. A kernel that
fails either way is refused: it gets no time. Exit 0 when every shape was timed and plausible; 1 when the
kernel was refused, wrong at a shape, or implausibly fast; 2 on bad usage or with no GPU (nothing is timed
on a CPU — there are no fake timings).

`--pipeline` (cake/cli/bench_pipeline.py) gates each step's kernel, checks a whole run against the workload's
fp64 reference pipeline, and times the composition against the pipeline's baselines; on a CPU the gates and
the check run under Triton's interpreter and nothing is timed (exit 2, or 1 when a gate or the check failed).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cake.cli.common import ExitCode, UsageError
from cake.cli.verify import add_schedule_options

if TYPE_CHECKING:
    from cake.evaluation.bench import ShapeReport
    from cake.experiments.workload import OpSpec, Shape

DEFAULT_VERIFY_TIMEOUT_S = 600.0
NO_GPU = "cake bench: no CUDA device here; timings are taken only on a GPU (nothing was timed)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="time a verified kernel against baselines (GPU only)")
    parser.add_argument("--op", help="the op contract; read from the schedule with --schedule")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--kernel", metavar="PATH.py:FUNC", help="a Python callable taking the op's inputs")
    source.add_argument("--schedule", metavar="FILE.cake", help="a CAKE schedule, lowered and loaded")
    add_schedule_options(parser)
    source.add_argument("--pipeline", metavar="NAME",
                        help="time a workload's pipeline (lloyd_iteration) composed of one kernel per step")
    parser.add_argument("--step", action="append", metavar="OP=SOURCE", default=[],
                        help="--pipeline: the kernel of step OP, FILE.cake[@triton|@cuda] or PATH.py:FUNC "
                             "(default: the pipeline's; for lloyd_iteration assign_pingpong.cake@cuda and "
                             "update_sorted.cake@triton)")
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
    if args.pipeline is not None:
        if args.param or args.backend:
            raise UsageError("--param and --backend name how a --schedule is lowered; a --pipeline's kernels are its "
                             "--step sources")
        from cake.cli.bench_pipeline import run_pipeline

        return run_pipeline(args)
    if args.step:
        raise UsageError("--step names the kernels of a --pipeline")
    from cake.cli.verify import check_op, resolve_kernel
    from cake.evaluation.bench import BenchRequest, BenchSetupError, bench_kernel
    from cake.experiments.workload import UnknownWorkloadError, workload_for_op

    op, ref = resolve_kernel(args)
    check_op(op)
    try:
        spec = workload_for_op(op).op(op)
    except UnknownWorkloadError as error:
        raise UsageError(f"{error}; `cake bench` needs a workload with shapes and baselines for {op}") from None
    shapes = _resolve_shapes(spec, args.shapes)
    for name in args.baseline or ():
        try:
            spec.baseline(name)
        except KeyError as error:
            raise UsageError(str(error.args[0])) from None

    import torch

    if not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return ExitCode.USAGE
    request = BenchRequest(op, ref, tuple(shapes), tuple(args.baseline) if args.baseline else None, seed=args.seed,
                           gate_timeout_s=args.timeout, reps=args.reps, max_seconds=args.max_seconds,
                           use_cache=not args.no_cache)
    try:
        bench = bench_kernel(request)
    except BenchSetupError as error:
        raise UsageError(str(error)) from None
    for dtype_name, v in bench.refused:
        print(f"cake bench: refusing to time {bench.kernel} at {dtype_name}: it has not passed the contract "
              f"gates ({v.detail}); run `cake verify` for the evidence", file=sys.stderr)
    if bench.refused:
        return ExitCode.FINDINGS
    print_reports(bench.reports, title=f"{op} · {bench.kernel} · {bench.device_name}")
    if args.json is not None:
        args.json.write_text(json.dumps(bench.to_json(torch=torch.__version__), indent=2) + "\n")
    return ExitCode.OK if bench.all_timed else ExitCode.FINDINGS


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
