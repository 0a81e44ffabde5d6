"""`cake verify`: run the contract gates on one kernel, isolated in a worker process.

Exit 0 when every gate passed (skips are shown, with their reasons), 1 on a contract violation (FAIL,
TIMEOUT or RUNTIME_ERROR), 2 on bad usage or a kernel that cannot be loaded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from cake.cli.common import ExitCode, UsageError

if TYPE_CHECKING:
    from cake.verifier.results import Evidence, Verdict
    from cake.verifier.selftest import MutantOutcome
    from cake.verifier.worker_protocol import KernelRef

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


def add_schedule_options(parser: argparse.ArgumentParser) -> None:
    """How a --schedule is lowered (`verify` and `bench`, which share `resolve_kernel`)."""
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="--schedule: bind one of its params (repeatable; default: the schedule's own defaults)")
    parser.add_argument("--backend", choices=("triton", "cuda"),
                        help="--schedule: the backend that lowers it (default: $CAKE_BACKEND, else triton)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("verify", help="run the contract gates on a kernel (isolated)")
    parser.add_argument("--op", help="the op contract (see `cake ops`); read from the schedule with --schedule")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--kernel", metavar="PATH.py:FUNC", help="a Python callable taking the op's inputs")
    source.add_argument("--schedule", metavar="FILE.cake", help="a CAKE schedule, lowered and loaded")
    add_schedule_options(parser)
    source.add_argument("--self-test", action="store_true",
                        help="mutate the correct controls of every op (or --op) and report the battery's kill score")
    add_battery_options(parser)
    parser.add_argument("--seeds", type=int, nargs="+", metavar="SEED",
                        help="run the battery under each seed (one worker, one compile); passes only if every seed does")
    parser.add_argument("--all-gates", action="store_true", help="run every gate even after a failure")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the verdict as JSON")
    parser.add_argument("--controls", nargs="+", metavar="SOURCE",
                        help="--self-test: torch sequential triton (default: those that run here)")
    parser.add_argument("--operators", nargs="+", metavar="ID", help="--self-test: only these mutation operators")
    parser.add_argument("--report", type=Path, metavar="OUT.md", help="--self-test: also write the tables here")
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


def schedule_options(args: argparse.Namespace) -> dict[str, str]:
    """The schedule loader's options from --backend and --param NAME=VALUE (the loader takes params as a JSON
    object of integers; a name the schedule does not declare is refused by the lowering, located in the file)."""
    options = {"backend": args.backend} if args.backend else {}
    params: dict[str, int] = {}
    for binding in args.param:
        name, sep, value = binding.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"--param {binding!r}: expected NAME=VALUE, e.g. --param BN=64")
        if name in params:
            raise UsageError(f"--param {name} is given twice")
        try:
            params[name] = int(value)
        except ValueError:
            raise UsageError(f"--param {binding!r}: params are integers, got {value!r}") from None
    if params:
        options["params"] = json.dumps(params, sort_keys=True)
    return options


def resolve_kernel(args: argparse.Namespace) -> tuple[str, KernelRef]:
    """The op and the kernel reference named by --op/--kernel or --schedule."""
    from cake.verifier.worker_protocol import KernelRef

    if args.schedule is not None:
        # The verifier never imports the lowering: its worker imports the loader by this name.
        from cake.lowering.runtime import SCHEDULE_LOADER, schedule_op

        if not Path(args.schedule).is_file():
            raise UsageError(f"schedule file {args.schedule!r} does not exist")
        op = args.op or schedule_op(args.schedule)
        from cake.experiments.workload import schedule_loader_for

        return op, KernelRef.loader(schedule_loader_for(op) or SCHEDULE_LOADER, args.schedule, schedule_options(args))
    if args.param or args.backend:
        raise UsageError("--param and --backend name how a --schedule is lowered; a --kernel is already compiled")
    if args.op is None:
        raise UsageError("--op is required with --kernel")
    return args.op, parse_kernel(args.kernel)


def kernel_identity(args: argparse.Namespace, ref: KernelRef) -> dict[str, object]:
    """What a --json verdict is of, written beside it so that a reader can refuse a verdict of another kernel:
    for --schedule the file's sha256 and the loader's options (backend, params); for --kernel its reference."""
    if args.schedule is None:
        return {"kernel": ref.describe()}
    digest = hashlib.sha256(Path(args.schedule).read_bytes()).hexdigest()
    return {"schedule": str(args.schedule), "sha256": digest, "options": dict(ref.options)}


def _write_json(path: Path, verdict_json: str, identity: dict[str, object]) -> None:
    path.write_text(json.dumps({**json.loads(verdict_json), "kernel": identity}, indent=2, sort_keys=True) + "\n")


def run(args: argparse.Namespace) -> int:
    from cake.verifier.worker import KernelLoadError, verify_in_worker

    if args.self_test:
        return run_self_test(args)
    if args.kernel is None and args.schedule is None:
        raise UsageError("one of --kernel, --schedule or --self-test is required")
    if args.seeds:
        return run_seeds(args)
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
        _write_json(args.json, verdict.to_json(), kernel_identity(args, ref))
    return ExitCode.OK if verdict.passed else ExitCode.FINDINGS


def run_seeds(args: argparse.Namespace) -> int:
    """The battery under every seed of --seeds, in one worker; each seed's table, then the summary."""
    from cake.verifier.multiseed import verify_seeds_in_worker
    from cake.verifier.worker import KernelLoadError

    op, ref = resolve_kernel(args)
    check_op(op)
    try:
        result = verify_seeds_in_worker(op, ref, seeds=args.seeds, device=args.device,
                                        dtypes=normalize_dtypes(args.dtypes), all_gates=args.all_gates,
                                        timeout_s=args.timeout, use_cache=not args.no_cache)
    except KernelLoadError as error:
        raise UsageError(str(error)) from None
    for seed, verdict in zip(result.seeds, result.verdicts, strict=True):
        print_verdict(verdict, f"{ref.describe()} · seed {seed}", device=args.device)
    print(f"{op}: {'PASSED' if result.passed else 'FAILED'} {result.summary()}")
    if args.json is not None:
        _write_json(args.json, result.to_json(), kernel_identity(args, ref))
    return ExitCode.OK if result.passed else ExitCode.FINDINGS


def _progress(o: MutantOutcome) -> None:
    said = f"killed by {', '.join(o.killed_by)}" if o.killed else "SURVIVED" if o.applicable else f"n/a: {o.note}"
    print(f"  {o.op:14} {o.control:10} {o.operator:18} {said}", flush=True)


def run_self_test(args: argparse.Namespace) -> int:
    """Exit 0 when every control passed and every surviving mutant is argued equivalent; 1 otherwise."""
    from cake.verifier.mutants import OPERATORS
    from cake.verifier.selftest import CONTROL_SOURCES, format_report, run_self_test

    if args.op is not None:
        check_op(args.op)
    for source in args.controls or ():
        if source not in CONTROL_SOURCES:
            raise UsageError(f"unknown control source {source!r}; known: {', '.join(CONTROL_SOURCES)}")
    for op_id in args.operators or ():
        if op_id not in OPERATORS:
            raise UsageError(f"unknown mutation operator {op_id!r}; known: {', '.join(OPERATORS)}")
    device = args.device
    report = run_self_test([args.op] if args.op else None, device=device, dtypes=normalize_dtypes(args.dtypes),
                           sources=args.controls, operators=args.operators, seed=args.seed, progress=_progress)
    text = format_report(report)
    print(text)
    if args.report is not None:
        args.report.write_text(text + "\n")
    ok = not report.unaccounted and not report.control_failures
    return ExitCode.OK if ok else ExitCode.FINDINGS


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
