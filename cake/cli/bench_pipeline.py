"""`cake bench --pipeline NAME`: arguments in, table and JSON out (the work is cake.evaluation.pipeline_bench).

    cake bench --pipeline lloyd_iteration --shapes cake_cell fk_fp16 --json lloyd.json
    cake bench --pipeline lloyd_iteration --step kmeans_assign=experiments/kmeans/triton_assign.py:assign \\
        --step kmeans_update=experiments/kmeans/update_onehot.cake            # any verified kernel per step
    TRITON_INTERPRET=1 cake bench --pipeline lloyd_iteration --step ... --shapes cpu_tiny   # CPU: gates + check

Exit 0: every shape checked, timed and plausible; 1: a step refused by its gates, a failed whole-run check,
or a shape not timed right; 2: bad usage, or no GPU (the gates and the check ran, nothing was timed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cake.cli.common import ExitCode, UsageError

if TYPE_CHECKING:
    from cake.evaluation.pipeline_bench import PipelineRun
    from cake.experiments.workload import Pipeline, Shape

NO_INTERPRETER = ("cake bench --pipeline: no CUDA device, so the kernels run on the CPU under Triton's interpreter; "
                  "set TRITON_INTERPRET=1 in the environment (before anything imports triton) and run again")


def _shapes(pipeline: Pipeline, texts: list[str] | None, on_gpu: bool) -> list[Shape]:
    from cake.experiments.workload import get_workload, parse_shape

    spec = get_workload(pipeline.inputs_from).op(pipeline.inputs_from)
    domain = [spec.cpu_shape, *spec.gpu_shapes]
    if not texts:
        return list(spec.gpu_shapes) if on_gpu else [spec.cpu_shape]
    try:
        return [parse_shape(t, domain, spec.gpu_shapes[0].dtype) for t in texts]
    except ValueError as error:
        raise UsageError(str(error)) from None


def run_pipeline(args: argparse.Namespace) -> int:
    import torch

    from cake.evaluation.bench import BenchSetupError
    from cake.evaluation.pipeline_bench import PipelineRequest, bench_pipeline, resolve_steps
    from cake.experiments.workload import UnknownWorkloadError, get_pipeline

    if args.op is not None:
        raise UsageError("--pipeline names its ops itself (its steps); drop --op")
    try:
        _, pipeline = get_pipeline(args.pipeline)
        for name in args.baseline or ():
            pipeline.baseline(name)
        steps = resolve_steps(pipeline, args.step, Path.cwd())
    except (UnknownWorkloadError, KeyError) as error:
        raise UsageError(str(error.args[0])) from None
    except BenchSetupError as error:
        raise UsageError(str(error)) from None
    on_gpu = torch.cuda.is_available()
    if not on_gpu and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise UsageError(NO_INTERPRETER)
    request = PipelineRequest(pipeline.name, steps, tuple(_shapes(pipeline, args.shapes, on_gpu)),
                              tuple(args.baseline) if args.baseline else None, seed=args.seed,
                              gate_timeout_s=args.timeout, reps=args.reps, max_seconds=args.max_seconds,
                              use_cache=not args.no_cache)
    try:
        run = bench_pipeline(request, "cuda" if on_gpu else "cpu")
    except BenchSetupError as error:
        raise UsageError(str(error)) from None
    for op, dtype, v in run.refused:
        print(f"cake bench: refusing to time {pipeline.name}: step {op} has not passed the contract gates at {dtype} "
              f"({v.detail}); run `cake verify` for the evidence", file=sys.stderr)
    print_pipeline(run)
    if args.json is not None:
        args.json.write_text(json.dumps(run.to_json(torch=torch.__version__), indent=2) + "\n")
    if run.refused or not run.all_checked:
        return ExitCode.FINDINGS
    if not on_gpu:
        print("cake bench: no CUDA device here; the gates and the whole-run check ran, timings are taken only on a "
              "GPU (nothing was timed)", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK if run.all_timed else ExitCode.FINDINGS


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_pipeline(run: PipelineRun) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 180))
    for op, described in run.steps:
        console.print(f"step {op}: {described}")
    for op, dtype, v in run.verifications:
        console.print(f"  gates {op} {dtype}: {'passed' if v.passed else 'FAILED'} ({v.source}: {v.detail})")
    table = Table(title=f"{run.pipeline} · {run.iterations} iterations per call · {run.device}")
    for column in ("shape", "contestant", "ms / iteration", "p10-p90 ms / it", "floor ms / it", "speedup", "status"):
        table.add_column(column, overflow="fold")
    for s in run.shapes:
        where = f"{s.shape.name} ({s.shape.describe()})"
        table.add_row(where, "fp64 whole-run check", "-", "-", "-", "-", str(s.check.get("summary")))
        if s.not_timed is not None:
            table.add_row(where, "-", "-", "-", "-", "-", f"not timed: {s.not_timed}")
        for m in s.measurements:
            per = run.iterations
            status = m.failure or ("IMPLAUSIBLE: below the roofline floor" if m.implausible else "ok")
            speedup = "-"
            if m.candidate and s.speedup is not None:
                speedup = _f(s.speedup.value, ".3f") if s.speedup.value is not None else f"undefined: {s.speedup.undefined}"
            spread = "-" if m.median_ms is None else f"{_f(m.p10_ms and m.p10_ms / per, '.4f')}-" \
                                                     f"{_f(m.p90_ms and m.p90_ms / per, '.4f')}"
            table.add_row(where, m.name, _f(m.median_ms and m.median_ms / per, ".4f"), spread,
                          f"{m.floor_ms / per:.4f}", speedup, status)
        for name, why in s.unavailable:
            table.add_row(where, name, "-", "-", "-", "-", f"not available: {why}")
    console.print(table)
