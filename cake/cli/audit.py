"""`cake audit`: judge kernels by the KernelBench-style standard check and by the contract gates.

Prints, per kernel, both outcomes; then the 2x2 table (standard pass/fail x contract pass/fail) and how
often each gate failed. The interesting cell is "standard PASS, contract FAIL": kernels the usual
check certifies that are broken. Exit 0 when every kernel passed the contract, 1 when one failed, 2 on
bad usage or an unloadable kernel (after auditing the others).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cake.cli.common import ExitCode, UsageError
from cake.cli.verify import add_battery_options, check_op, normalize_dtypes, parse_kernel

if TYPE_CHECKING:  # cake.verifier imports torch; `cake --help` must not
    from cake.verifier.audit import AuditRow


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("audit", help="standard check vs. contract gates on many kernels (2x2 table)")
    parser.add_argument("--op", required=True, help="the op contract every kernel implements")
    parser.add_argument("kernels", nargs="+", metavar="PATH.py:FUNC")
    add_battery_options(parser)
    parser.add_argument("--stop-early", action="store_true",
                        help="stop each battery at its first failure (faster; per-gate counts then undercount)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the audit as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cake.verifier.audit import AuditRow, TwoByTwo, gate_failure_counts
    from cake.verifier.worker import KernelLoadError, audit_in_worker

    check_op(args.op)
    dtypes = normalize_dtypes(args.dtypes)
    refs = [parse_kernel(text) for text in args.kernels]  # every reference is checked before any runs
    rows: list[AuditRow] = []
    unloadable: list[str] = []
    for ref in refs:
        try:
            standard, verdict = audit_in_worker(args.op, ref, device=args.device, dtypes=dtypes, seed=args.seed,
                                                all_gates=not args.stop_early, timeout_s=args.timeout,
                                                use_cache=not args.no_cache)
        except KernelLoadError as error:
            print(f"cake audit: {error}", file=sys.stderr)
            unloadable.append(ref.describe())
            continue
        rows.append(AuditRow(ref.describe(), standard.passed, standard.reason, verdict))
    print_audit(args.op, rows)
    if args.json is not None:
        data = {"op": args.op, "device": args.device, "seed": args.seed, "kernels": [r.to_json() for r in rows],
                "unloadable": unloadable, "two_by_two": TwoByTwo.of(rows).to_json(),
                "gate_failures": gate_failure_counts(rows)}
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    if unloadable:
        raise UsageError(f"{len(unloadable)} kernel(s) could not be loaded: {', '.join(unloadable)}")
    return ExitCode.OK if all(r.verdict.passed for r in rows) else ExitCode.FINDINGS


def print_audit(op: str, rows: Sequence[AuditRow]) -> None:
    from rich.console import Console
    from rich.table import Table

    from cake.verifier.audit import TwoByTwo, gate_failure_counts

    console = Console(width=max(Console().width, 140))
    per_kernel = Table(title=f"audit · {op}")
    for column in ("kernel", "standard check", "contract", "failed gates"):
        per_kernel.add_column(column, overflow="fold")
    for row in rows:
        per_kernel.add_row(row.kernel, "[green]PASS[/]" if row.standard_passed else "[red]FAIL[/]",
                           "[green]PASS[/]" if row.verdict.passed else "[bold red]FAIL[/]",
                           " ".join(row.failed_gates))
    console.print(per_kernel)
    table = TwoByTwo.of(rows)
    grid = Table(title="standard check × contract gates")
    grid.add_column("")
    grid.add_column("contract PASS", justify="right")
    grid.add_column("contract FAIL", justify="right")
    grid.add_row("standard PASS", str(table.std_pass_contract_pass), f"[bold red]{table.std_pass_contract_fail}[/]")
    grid.add_row("standard FAIL", str(table.std_fail_contract_pass), str(table.std_fail_contract_fail))
    console.print(grid)
    counts = gate_failure_counts(rows)
    if counts:
        gates = Table(title="failures per gate")
        gates.add_column("gate")
        gates.add_column("kernels failing", justify="right")
        for gate, n in counts.items():
            gates.add_row(gate, str(n))
        console.print(gates)
