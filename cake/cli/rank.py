"""`cake rank`: order schedules by the cost model's predicted time, before any GPU time is spent.

    cake rank a.cake b.cake --arch sm_90a [--shape B=32,N=65536,K=1024,D=128] [--param BN=256 ...]
    cake rank assign_plain.cake --sweep            # every param assignment in the schedule's domains

Predictions use the stored calibration for the device (see `cake.ir.cost_calibration`), else priors.
Exit 0 when every schedule was priced; 1 when some could not be (it does not fit an SM, or a size is
unbound); 2 on bad usage or a file that does not parse.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cake.cli.common import ExitCode, UsageError

DTYPES = ("bf16", "fp16", "fp32")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("rank", help="rank schedules by predicted time (cost model, no GPU)")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.cake")
    parser.add_argument("--arch", help="target to rank for (default: each schedule's own target)")
    parser.add_argument("--device", help="device of cake.arch (default: the arch's default device)")
    parser.add_argument("--backend", choices=("triton", "cuda"),
                        help="the backend that will lower the schedules: picks its calibration (default: none, "
                             "uncalibrated priors)")
    parser.add_argument("--shape", help="sizes B=32,N=65536,... (default: the op's first GPU shape)")
    parser.add_argument("--dtype", choices=DTYPES, help="element type (default: the shape's, else bf16)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="fix a param in every schedule that declares it")
    parser.add_argument("--sweep", action="store_true", help="rank every assignment of each schedule's params")
    parser.add_argument("--top", type=int, help="print only the best N")
    parser.add_argument("--json", action="store_true", help="print predictions as JSON")
    parser.set_defaults(run=run)


def _pairs(texts: Sequence[str], what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for text in texts:
        for item in text.split(","):
            name, eq, value = item.partition("=")
            if not eq or not name.strip().isidentifier() or not value.strip().lstrip("-").isdigit():
                raise UsageError(f"{what} {item!r} is not of the form NAME=INTEGER")
            out[name.strip()] = int(value)
    return out


def _default_shape(op: str) -> tuple[dict[str, int], str] | None:
    from cake.experiments.workload import UnknownWorkloadError, workload_for_op

    try:
        shape = workload_for_op(op).op(op).gpu_shapes[0]
    except (UnknownWorkloadError, KeyError, IndexError):
        return None
    return shape.dim_map, shape.dtype


def _parse(path: Path) -> Any:
    from cake.diagnostics import render_all
    from cake.ir.parser import parse_diagnostics

    try:
        text = path.read_text()
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    kernel, diagnostics = parse_diagnostics(text, str(path))
    if kernel is None:
        print(render_all(diagnostics, text), file=sys.stderr)
        raise UsageError(f"{path} does not parse")
    return kernel


def run(args: argparse.Namespace) -> int:
    from cake.arch import DEVICES, UnknownArchError
    from cake.experiments.schedules import param_grid
    from cake.ir.cost import CostError, predict
    from cake.ir.cost_calibration import UnknownTargetError
    from cake.ir.nodes import DType

    fixed = _pairs(args.param, "--param")
    explicit = _pairs([args.shape], "--shape") if args.shape else None
    if args.device is not None and args.device not in DEVICES:
        raise UsageError(f"unknown device {args.device!r}; known: {', '.join(DEVICES)}")
    rows: list[tuple[str, dict[str, int], Any]] = []
    failures: list[tuple[str, dict[str, int], str]] = []
    for path in args.files:
        kernel = _parse(path)
        shape = (explicit, args.dtype or "bf16") if explicit else _default_shape(kernel.op)
        if shape is None:
            raise UsageError(f"{path}: no --shape given and no workload defines shapes for `{kernel.op}`")
        dims, shape_dtype = shape
        dtype = {"bf16": DType.BF16, "fp16": DType.F16, "fp32": DType.F32}[args.dtype or shape_dtype]
        mine = {k: v for k, v in fixed.items() if kernel.param(k) is not None}
        assignments = [{**a, **mine} for a in param_grid(kernel)] if args.sweep else [mine]
        seen: set[tuple[tuple[str, int], ...]] = set()
        for params in assignments:
            key = tuple(sorted(params.items()))
            if key in seen:
                continue
            seen.add(key)
            try:
                rows.append((str(path), params, predict(kernel, dims=dims, dtype=dtype, params=params,
                                                        device=args.device, arch_name=args.arch,
                                                        backend=args.backend)))
            except (UnknownArchError, UnknownTargetError) as error:
                raise UsageError(str(error)) from None
            except CostError as error:
                failures.append((str(path), params, str(error)))
    rows.sort(key=lambda r: r[2].time_s)
    shown = rows[: args.top] if args.top else rows
    if args.json:
        print(json.dumps({"ranked": [{"file": f, **p.to_json()} for f, _, p in shown],
                          "unpriced": [{"file": f, "params": a, "reason": r} for f, a, r in failures]}, indent=2))
    else:
        _print_table(shown, failures)
    return ExitCode.FINDINGS if failures else ExitCode.OK


def _print_table(rows: Sequence[tuple[str, dict[str, int], Any]], failures: Sequence[tuple[str, dict[str, int], str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    first = rows[0][2] if rows else None
    title = "predicted times" + (f" · {first.device} ({first.arch}) · {first.calibration.label}"
                                 if first else "")
    table = Table(title=title)
    for column in ("#", "schedule", "params", "predicted ms", "bound", "CTAs/SM (limit)", "smem B", "regs"):
        table.add_column(column, overflow="fold")
    for i, (path, _, p) in enumerate(rows, 1):
        main = max(p.launches, key=lambda lp: lp.time_s)
        occ = main.occupancy
        params = " ".join(f"{k}={v}" for k, v in p.params)
        table.add_row(str(i), Path(path).name, params, f"{p.time_ms:.4f}", p.bound.value,
                      f"{occ.ctas_per_sm} ({occ.limited_by})", f"{occ.smem_bytes_per_cta:,}", str(occ.regs_per_thread))
    for failed_path, failed_params, reason in failures:
        table.add_row("-", Path(failed_path).name, " ".join(f"{k}={v}" for k, v in failed_params.items()), "-", "-",
                      "-", "-", f"not priced: {reason}")
    Console(width=max(Console().width, 150)).print(table)
