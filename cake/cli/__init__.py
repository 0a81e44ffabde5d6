"""The `cake` command. Each subcommand lives in its own module under `cake.cli` and exposes
`register(subparsers)`; heavy imports (torch, triton) happen inside the command, so `cake --help` is fast."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from cake import __version__
from cake.cli.common import ExitCode, UsageError
from cake.errors import InternalError

# Subcommand modules, in the order `cake --help` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "arch",
    "check",
    "fmt",
    "lower",
    "verify",
    "replay",
    "audit",
    "ops",
    "rank",
    "bench",
    "evolve",
    "experiment",
    "report",
    "distill",
    "rules",
    "export",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cake",
        description="Evolve GPU kernels through a typed schedule IR, verified by contract gates.",
    )
    parser.add_argument("--version", action="version", version=f"cake {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"cake.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return ExitCode.USAGE
    try:
        return int(args.run(args))
    except UsageError as error:
        print(f"cake {args.command}: error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    except InternalError as error:
        print(f"cake {args.command}: {error.report()}", file=sys.stderr)
        return ExitCode.INTERNAL
