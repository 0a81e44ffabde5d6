"""`cake lower`: lower a schedule to backend source (Triton Python or CUDA C++).

Exit 0 with the source on stdout (or in `-o OUT`); 1 when the schedule has findings (it does not parse,
the checker or the backend refuses it); 2 on bad usage, an unreadable file or an unavailable backend; 3 on an
internal error (a check, pass or generator crashed: a bug in CAKE, reported with the failing pass).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cake.cli.common import ExitCode, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lower", help="lower a schedule to Triton or CUDA source",
        description="Lower a schedule through the backend's pass pipeline and print the generated source. "
                    "Exit 0 ok, 1 the schedule was refused (diagnostics on stderr), 2 bad usage, 3 an internal "
                    "error (a bug in CAKE).")
    parser.add_argument("file", nargs="?", metavar="FILE.cake", help="the schedule")
    parser.add_argument("--backend", default="triton", help="triton (default) or cuda")
    parser.add_argument("--arch", help="target (default: the schedule's `target`)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="bind a param (repeatable; others keep their defaults)")
    parser.add_argument("-o", "--output", type=Path, metavar="OUT", help="write the source here")
    parser.add_argument("--dump-after", metavar="PASS",
                        help="print the IR after PASS (`emit`: the generated source); see --list-passes")
    parser.add_argument("--list-passes", action="store_true", help="print the backend's pipeline and exit")
    parser.set_defaults(run=run)


def parse_params(pairs: list[str]) -> dict[str, int]:
    params: dict[str, int] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        try:
            params[name.strip()] = int(text)
        except ValueError:
            raise UsageError(f"--param expects NAME=INTEGER, got `{pair}`") from None
        if not sep or not name.strip().isidentifier():
            raise UsageError(f"--param expects NAME=INTEGER, got `{pair}`")
    return params


def run(args: argparse.Namespace) -> int:
    from cake.arch import ARCHS
    from cake.diagnostics import DiagnosticError, render_all
    from cake.ir.nodes import Kernel
    from cake.ir.parser import parse
    from cake.ir.printer import print_kernel
    from cake.lowering import codes
    from cake.lowering.backend import get_backend
    from cake.lowering.pipeline import EMIT, pass_names
    from cake.lowering.runtime import lower

    try:
        backend = get_backend(args.backend)
    except DiagnosticError as error:
        raise UsageError(error.diagnostics[0].message) from None
    if args.list_passes:
        for step in backend.passes:
            print(f"{step.name:<20} {step.summary}")
        print(f"{EMIT:<20} generate {backend.name} source")
        return ExitCode.OK
    if args.file is None:
        raise UsageError("no schedule file given (or use --list-passes)")
    if args.arch is not None and args.arch not in ARCHS:
        raise UsageError(f"unknown arch `{args.arch}`; known targets: {', '.join(ARCHS)}")
    if args.dump_after is not None and args.dump_after not in pass_names(backend.passes):
        raise UsageError(f"unknown pass `{args.dump_after}`; passes: {', '.join(pass_names(backend.passes))}")
    params = parse_params(args.param)
    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {args.file}: {getattr(error, 'strerror', None) or error}") from None

    def dump(name: str, kernel: Kernel) -> None:
        print(f"# IR after {name}")
        print(print_kernel(kernel), end="")

    try:
        lowered = lower(parse(text, args.file), backend.name, params=params, arch=args.arch, filename=args.file,
                        source_text=text, dump_after=args.dump_after, dump=dump)
    except DiagnosticError as error:
        if any(d.code == codes.NO_BACKEND for d in error.diagnostics):
            raise UsageError(error.diagnostics[0].message) from None
        print(render_all(error.diagnostics, text), file=sys.stderr)
        return ExitCode.FINDINGS
    if args.output is not None:
        args.output.write_text(lowered.source, encoding="utf-8")
        for name, artifact in lowered.artifacts:
            (args.output.parent / name).write_text(artifact, encoding="utf-8")
        print(f"wrote {args.output} ({lowered.backend}, {lowered.arch}, entry `{lowered.entry}`)", file=sys.stderr)
    if args.dump_after == EMIT or (args.output is None and args.dump_after is None):
        print(lowered.source, end="")
    return ExitCode.OK
