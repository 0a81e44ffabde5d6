"""`cake verify`: run the contract gates on one kernel, isolated in a worker process.

Exit 0 when every gate passed (skips are shown, with their reasons), 1 on a contract violation (FAIL,
TIMEOUT or RUNTIME_ERROR), 2 on bad usage or a kernel that cannot be loaded.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cake.cli.common import ExitCode, UsageError

if TYPE_CHECKING:
    from cake.verifier.results import Evidence, Verdict
    from cake.verifier.worker_protocol import KernelRef

# `--schedule` loads a `.cake` file through the lowering's runtime. The verifier never imports the
# lowering; the worker imports the loader by this name, and only the CLI asks it for the schedule's op.
SCHEDULE_LOADER_MODULE = "cake.lowering.runtime"
SCHEDULE_LOADER = f"{SCHEDULE_LOADER_MODULE}:load_schedule"

DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
                 "float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}
DEFAULT_DTYPES = ("float32", "float16", "bfloat16")
DEFAULT_TIMEOUT_S = 120.0

STATUS_STYLE = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow", "TIMEOUT": "bold magenta",
                "RUNTIME_ERROR": "bold magenta"}


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by `verify`, `audit` and `replay`."""
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the kernel runs; cpu runs Triton kernels under the interpreter")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds per gate before the worker is killed (default {DEFAULT_TIMEOUT_S:g})")


def add_battery_options(parser: argparse.ArgumentParser) -> None:
    add_run_options(parser)
    parser.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES), metavar="DTYPE",
                        help="fp32 fp16 bf16 (default: all three)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every gate's inputs (default 0)")
    parser.add_argument("--no-cache", action="store_true", help="ignore and do not write the verdict cache")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("verify", help="run the contract gates on a kernel (isolated)")
    parser.add_argument("--op", help="the op contract (see `cake ops`); read from the schedule with --schedule")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--kernel", metavar="PATH.py:FUNC", help="a Python callable taking the op's inputs")
    source.add_argument("--schedule", metavar="FILE.cake", help="a CAKE schedule, lowered and loaded")
    add_battery_options(parser)
    parser.add_argument("--all-gates", action="store_true", help="run every gate even after a failure")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the verdict as JSON")
    parser.set_defaults(run=run)


def normalize_dtypes(names: list[str]) -> tuple[str, ...]:
    try:
        return tuple(dict.fromkeys(DTYPE_ALIASES[name.lower()] for name in names))
    except KeyError as error:
        raise UsageError(f"unknown dtype {error.args[0]!r}; use fp32, fp16 or bf16") from None


def check_op(op: str) -> None:
    from cake.verifier.registry import CONTRACTS

    if op not in CONTRACTS:
        raise UsageError(f"unknown op {op!r}; known: {', '.join(sorted(CONTRACTS))}")


def parse_kernel(text: str) -> KernelRef:
    from cake.verifier.worker_protocol import KernelRef, KernelRefError

    try:
        return KernelRef.parse(text)
    except KernelRefError as error:
        raise UsageError(str(error)) from None


def _schedule_loader_module(schedule: str) -> Any:
    if not Path(schedule).is_file():
        raise UsageError(f"schedule file {schedule!r} does not exist")
    try:
        module = importlib.import_module(SCHEDULE_LOADER_MODULE)
    except ImportError as error:
        raise UsageError(f"--schedule needs the schedule loader {SCHEDULE_LOADER}, which is not available "
                         f"in this installation ({error}); verify the lowered kernel with --kernel instead") from None
    for name in ("load_schedule", "schedule_op"):
        if not callable(getattr(module, name, None)):
            raise UsageError(f"--schedule: {SCHEDULE_LOADER_MODULE} has no function {name}()")
    return module


def resolve_kernel(args: argparse.Namespace) -> tuple[str, KernelRef]:
    """The op and the kernel reference named by --op/--kernel or --schedule."""
    from cake.verifier.worker_protocol import KernelRef

    if args.schedule is not None:
        module = _schedule_loader_module(args.schedule)
        op = args.op or str(module.schedule_op(args.schedule))
        return op, KernelRef.loader(SCHEDULE_LOADER, args.schedule)
    if args.op is None:
        raise UsageError("--op is required with --kernel")
    return args.op, parse_kernel(args.kernel)


def run(args: argparse.Namespace) -> int:
    from cake.verifier.worker import KernelLoadError, verify_in_worker

    op, ref = resolve_kernel(args)
    check_op(op)
    dtypes = normalize_dtypes(args.dtypes)
    try:
        verdict = verify_in_worker(op, ref, device=args.device, dtypes=dtypes, seed=args.seed,
                                   all_gates=args.all_gates, timeout_s=args.timeout, use_cache=not args.no_cache)
    except KernelLoadError as error:
        raise UsageError(str(error)) from None
    print_verdict(verdict, ref.describe(), device=args.device)
    if args.json is not None:
        args.json.write_text(verdict.to_json() + "\n")
    return ExitCode.OK if verdict.passed else ExitCode.FINDINGS


def evidence_text(ev: Evidence | None) -> str:
    if ev is None:
        return ""
    where = f"{ev.tensor}[{', '.join(map(str, ev.index))}]"
    text = f"{where}: got {ev.got}, expected {ev.expected}; |err| {ev.error:.3g} > tol {ev.tolerance:.3g}"
    return f"{text}; {ev.note}" if ev.note else text


def print_verdict(verdict: Verdict, kernel: str, *, device: str) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    title = f"{verdict.op} · {kernel} · {device}"
    table = Table(title=title, show_lines=True)
    for column in ("gate", "status", "cases", "dtypes", "reason", "evidence", "replay token"):
        table.add_column(column, overflow="fold")
    for result in verdict.gates:
        status = result.status.value
        table.add_row(result.gate_id, f"[{STATUS_STYLE[status]}]{status}[/]", str(result.cases_run),
                      result.dtype_summary(), result.reason, evidence_text(result.evidence), result.replay_token or "")
    console = Console(width=max(Console().width, 160))
    console.print(table)
    if verdict.refused:  # shapes the kernel refused (ShapeNotSupported): not run, not judged
        console.print(f"[yellow]{escape(verdict.refused_summary)}[/]")
    if verdict.passed:
        outcome = "[green]PASSED[/]"
    elif verdict.failures:
        outcome = f"[bold red]FAILED[/] ({len(verdict.failures)} gate(s))"
    else:
        outcome = "[bold red]FAILED[/] (CMP-01 judged no supported case of a dtype: every one was refused)"
    console.print(f"{verdict.op}: {outcome}")
