"""`cake check`: parse and statically check schedules; rustc-style diagnostics (or JSON)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cake.cli.common import ExitCode, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("check", help="statically check CAKE schedules",
                                   description="Parse and check schedules. Exit 0 clean, 1 errors found, "
                                               "2 bad usage or unreadable file, 3 an internal error (a bug in "
                                               "CAKE: report it).")
    parser.add_argument("files", nargs="*", metavar="FILE", help=".cake schedule files")
    parser.add_argument("--arch", help="check against this target instead of each schedule's own")
    parser.add_argument("--backend", choices=("triton", "cuda"), help="also check what this backend can express")
    parser.add_argument("--json", action="store_true", help="print diagnostics as JSON")
    parser.add_argument("--list", action="store_true", help="print the table of check IDs and exit")
    parser.add_argument("--rules", action="append", default=[], metavar="FILE",
                        help="load learned rules from a JSON file (repeatable)")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                        help="bind a symbolic dim so budgets that depend on it can be proven (repeatable)")
    parser.set_defaults(run=run)


def _dims(pairs: list[str]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for pair in pairs:
        name, _, size = pair.partition("=")
        if not name or not size.isdigit() or int(size) <= 0:
            raise UsageError(f"--dim expects NAME=SIZE with a positive size, got `{pair}`")
        dims[name.strip()] = int(size)
    return dims


def run(args: argparse.Namespace) -> int:
    from cake.arch import ARCHS
    from cake.diagnostics import render_all, to_json
    from cake.ir.check import check_text
    from cake.ir.checks.registry import Backend, all_checks
    from cake.ir.rules import RuleFormatError, load_rules, rule_checks

    rules = []
    for path in args.rules:
        try:
            rules.extend(load_rules(path))
        except (OSError, RuleFormatError) as error:
            raise UsageError(f"cannot load rules from {path}: {error}") from None
    specs = rule_checks(rules)
    if args.list:
        rows = [(s.id, s.family.title, s.title, s.backend.value if s.backend else "any")
                for s in (*all_checks(), *specs)]
        if args.json:
            print(json.dumps([dict(zip(("id", "family", "title", "backend"), r, strict=True)) for r in rows], indent=2))
        else:
            for rid, family, title, backend in rows:
                print(f"{rid:<8} {family:<24} {backend:<7} {title}")
        return ExitCode.OK
    if not args.files:
        raise UsageError("no schedule files given (or use --list)")
    if args.arch is not None and args.arch not in ARCHS:
        raise UsageError(f"unknown arch `{args.arch}`; known targets: {', '.join(ARCHS)}")
    dims = _dims(args.dim)
    backend = Backend(args.backend) if args.backend else None
    unreadable = False
    found = []
    errors = warnings = 0
    for name in args.files:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            print(f"cake check: error: cannot read {name}: {getattr(error, 'strerror', None) or error}",
                  file=sys.stderr)
            unreadable = True
            continue
        diagnostics = check_text(text, name, arch=args.arch, backend=backend, rules=specs, dims=dims)
        found.extend(diagnostics)
        errors += sum(1 for d in diagnostics if d.is_error)
        warnings += sum(1 for d in diagnostics if d.severity.value == "warning")
        if not args.json and diagnostics:
            print(render_all(diagnostics, text), end="\n\n")
    if args.json:
        print(to_json(found))
    else:
        print(f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''} "
              f"in {len(args.files)} file{'s' if len(args.files) != 1 else ''}", file=sys.stderr)
    if unreadable:
        return ExitCode.USAGE
    return ExitCode.FINDINGS if errors else ExitCode.OK
