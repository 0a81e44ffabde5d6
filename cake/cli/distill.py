"""`cake distill RUN_DIR`: turn a run's recurring failures into learned rules and calibration targets.

    cake distill runs/20261130-101500-flash_kmeans-s0
    cake distill RUN_DIR --threshold 5 --json

Learned rules go to RUN_DIR/rules (active when they passed their validation gate, rejected otherwise);
large cost-model errors go to RUN_DIR/calibration_targets.jsonl. Exit 0 when the run was distilled
(whether or not a rule was learned), 2 when RUN_DIR is not a run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cake.cli.common import ExitCode, UsageError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("distill", help="learn static checks from a run's recurring failures",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--threshold", type=int, default=None,
                   help="failures with one signature before a rule is proposed (default 3)")
    p.add_argument("--max-conditions", type=int, default=None, help="conditions a rule may combine (default 3)")
    p.add_argument("--misprediction", type=float, default=None,
                   help="|log(predicted/measured)| above which a timing is a calibration target (default ln 2)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from cake.agents.distiller import DistillSettings, distill
    from cake.agents.synthesis import text
    from cake.runs.rulestore import RuleFileError
    from cake.runs.store import NotARunError, RunStore

    settings = DistillSettings()
    for name, value in (("threshold", args.threshold), ("max_conditions", args.max_conditions),
                        ("misprediction_log_error", args.misprediction)):
        if value is not None:
            if value <= 0:
                raise UsageError(f"--{name.replace('_', '-')} must be positive")
            settings = replace(settings, **{name: value})
    try:
        store = RunStore.open(args.run_dir)
    except NotARunError as exc:
        raise UsageError(str(exc)) from None
    with store:
        try:
            report = distill(store, settings=settings)
        except RuleFileError as exc:
            raise UsageError(f"{args.run_dir}/rules: {exc}") from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return ExitCode.OK
    print(f"{report.failures} failed evaluation(s) in {report.clusters} signature cluster(s); "
          f"{len(report.outcomes)} recurring (>= {settings.threshold})")
    for o in report.outcomes:
        kind, code = o.key
        head = f"{kind} {code}".strip()
        ids = ", ".join(str(i) for i in o.candidate_ids[:8]) + (" ..." if len(o.candidate_ids) > 8 else "")
        if o.status is None:
            print(f"  {head} [candidates {ids}]: no rule — {o.reason}")
            continue
        when = " and ".join(text(c) for c in o.conditions)
        print(f"  {head} [candidates {ids}]: {o.rule_id} {o.status.value} — when {when}; {o.reason}")
    print(f"{len(report.learned)} rule(s) active, {len(report.rejected)} rejected by the gate; "
          f"{report.mispredictions} new calibration target(s); {report.seconds:.2f} s")
    return ExitCode.OK
