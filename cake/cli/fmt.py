"""`cake fmt FILE`: print a schedule in canonical form (comments kept); idempotent."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cake.cli.common import ExitCode, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fmt", help="print a CAKE schedule in canonical form",
                                   description="Print FILE in canonical form on stdout. Exit 0 ok, 1 with "
                                               "--check when FILE is not canonical, 2 on a parse error or "
                                               "unreadable file.")
    parser.add_argument("file", metavar="FILE", help=".cake schedule file")
    parser.add_argument("--check", action="store_true",
                        help="print nothing; exit 1 when FILE differs from its canonical form")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cake.diagnostics import DiagnosticError, render_all
    from cake.ir.printer import format_source

    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {args.file}: {error}") from None
    try:
        formatted = format_source(text, args.file)
    except DiagnosticError as error:
        print(render_all(error.diagnostics, text), file=sys.stderr)
        return ExitCode.USAGE
    if args.check:
        return ExitCode.OK if formatted == text else ExitCode.FINDINGS
    sys.stdout.write(formatted)
    return ExitCode.OK
