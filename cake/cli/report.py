"""`cake report RUN_DIR`: a markdown summary and PNG plots of an evolution run (`--json`: the same as data).

    cake report runs/20261130-101500-flash_kmeans-s0            # writes RUN_DIR/report/report.md + *.png
    cake report runs/20261130-101500-flash_kmeans-s0 --json     # prints the report, candidates in proposal order
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cake.cli.common import ExitCode, UsageError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("report", help="summary and plots of an evolution run",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of writing files")
    p.add_argument("-o", "--out", type=Path, default=None, help="where to write (default: RUN_DIR/report)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cake.runs.report import build, write
    from cake.runs.store import NotARunError, RunStore

    try:
        store = RunStore.open_read_only(args.run_dir)  # committed runs stay byte-identical
    except NotARunError as error:
        raise UsageError(str(error)) from None
    with store:
        report = build(store)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return ExitCode.OK
    for path in write(report, args.out or args.run_dir / "report"):
        print(path)
    return ExitCode.OK
