"""`cake rules`: the learned static checks, per user and per run.

    cake rules list [--run RUN_DIR] [--all]        # active rules (--all: disabled and rejected too)
    cake rules show ID [--run RUN_DIR] [--json]     # the rule, its provenance and its validation
    cake rules test ID [FILE...] [--run RUN_DIR]    # run one rule on FILEs; without FILEs, on the shipped
                                                    #   schedules (and the run's verified candidates)
    cake rules disable ID [--run RUN_DIR]           # switch a rule off (a new revision; nothing deleted)
    cake rules enable ID [--run RUN_DIR]

User rules live in $CAKE_RULES_DIR (default ~/.config/cake/rules); a run's in RUN_DIR/rules.
Exit codes: 0 ok; 1 `test` found a schedule the rule rejects (with FILEs), or a known-good schedule
it rejects (without); 2 usage, unknown rule, unreadable file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cake.cli.common import ExitCode, UsageError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("rules", help="list, show, test and disable learned static checks",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    run_help = "a run directory: its own rules (RUN_DIR/rules) as well as the user's"
    lst = sub.add_parser("list", help="the rules that apply")
    lst.add_argument("--run", dest="run_dir", type=Path, metavar="RUN_DIR", help=run_help)
    lst.add_argument("--all", action="store_true", help="disabled and rejected rules too")
    show = sub.add_parser("show", help="one rule with its provenance and validation")
    show.add_argument("id")
    show.add_argument("--run", dest="run_dir", type=Path, metavar="RUN_DIR", help=run_help)
    show.add_argument("--json", action="store_true")
    test = sub.add_parser("test", help="run one rule on schedules")
    test.add_argument("id")
    test.add_argument("files", nargs="*", type=Path, metavar="FILE")
    test.add_argument("--run", dest="run_dir", type=Path, metavar="RUN_DIR", help=run_help)
    test.add_argument("--arch", default=None, help="check FILEs for this arch (default: each file's target)")
    for name, helptext in (("disable", "switch a rule off"), ("enable", "switch a disabled rule back on")):
        q = sub.add_parser(name, help=helptext)
        q.add_argument("id")
        q.add_argument("--run", dest="run_dir", type=Path, metavar="RUN_DIR", help=run_help)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cake.runs.rulestore import RuleFileError, UnknownRuleError

    if args.run_dir is not None and not args.run_dir.is_dir():
        raise UsageError(f"{args.run_dir} is not a directory")
    try:
        return int({"list": _list, "show": _show, "test": _test, "disable": _disable,
                    "enable": _enable}[args.action](args))
    except (RuleFileError, UnknownRuleError) as exc:
        raise UsageError(str(exc)) from None


def _find(args: argparse.Namespace) -> Any:
    """The rule `args.id`, the run's copy first (it overrides the user's)."""
    from cake.runs.rulestore import UnknownRuleError, scopes

    for store in reversed(scopes(args.run_dir)):
        if store.has(args.id):
            return store.get(args.id), store
    where = "the user's rules" + (f" or {args.run_dir}/rules" if args.run_dir else "")
    raise UnknownRuleError(f"no rule `{args.id}` in {where}")


def _list(args: argparse.Namespace) -> int:
    from cake.runs.rulestore import effective_rules, scopes

    rules = [r for r in effective_rules(scopes(args.run_dir)) if args.all or r.active]
    if not rules:
        print("no rules" if args.all else "no active rules (--all shows disabled and rejected ones)")
        return ExitCode.OK
    for r in rules:
        n = r.provenance.get("count", "?")
        print(f"{r.id}  {r.status.value:<8}  rev {r.revision}  {r.scope.value:<4}  from {n} failures  "
              f"{r.rule.get('title', '')}")
    return ExitCode.OK


def _show(args: argparse.Namespace) -> int:
    rule, _ = _find(args)
    if args.json:
        print(json.dumps(rule.to_json(), indent=2, sort_keys=True))
        return ExitCode.OK
    v, p = rule.validation, rule.provenance
    print(f"{rule.id} ({rule.status.value}, revision {rule.revision}, {rule.scope.value} rules: {rule.path})")
    print(f"  {rule.rule.get('message', '')}")
    print(f"  when {json.dumps(rule.rule.get('predicate'))}")
    print(f"  from candidates {p.get('source_candidates', [])} of {p.get('run', '?')}")
    print(f"  validation: {'passed' if v.get('passed') else 'FAILED'}; rejects {v.get('failures_rejected')}"
          f"/{v.get('failures')} source failures; accepts {v.get('known_good_accepted')}/{v.get('known_good')} "
          f"known-good schedules")
    for name in v.get("false_rejects", ())[:10]:
        print(f"    would reject known-good {name}")
    for h in rule.history:
        print(f"  revision {h.get('revision')}: {h.get('status')} — {h.get('note', '')}")
    return ExitCode.OK


def _test(args: argparse.Namespace) -> int:
    from cake.agents.distiller import KnownGood, gate_rule, known_good, shipped_schedules
    from cake.diagnostics import DiagnosticError, render_all
    from cake.ir.parser import parse
    from cake.runs.store import NotARunError, RunStore

    rule, _ = _find(args)
    if args.files:
        flagged = 0
        for path in args.files:
            try:
                text = path.read_text()
                kernel = parse(text, path.name)
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"cannot read {path}: {exc}") from None
            except DiagnosticError as exc:
                raise UsageError(f"{path} does not parse:\n{render_all(exc.diagnostics, text)}") from None
            hits = gate_rule(rule.rule, [KnownGood(str(path), kernel, args.arch or kernel.target)])
            if hits:
                flagged += 1
                print(render_all(hits[0][1], text))
            else:
                print(f"{path}: not rejected by {rule.id}")
        return ExitCode.FINDINGS if flagged else ExitCode.OK
    goods = shipped_schedules()
    if args.run_dir is not None:
        try:
            with RunStore.open(args.run_dir) as store:
                goods = known_good(store, store.config.get("arch"))
        except NotARunError as exc:
            raise UsageError(str(exc)) from None
    hits = gate_rule(rule.rule, goods)
    for name, _diags in hits:
        print(f"{rule.id} rejects known-good {name}")
    print(f"{rule.id}: {len(goods) - len(hits)}/{len(goods)} known-good schedules accepted")
    return ExitCode.FINDINGS if hits else ExitCode.OK


def _set(args: argparse.Namespace, active: bool) -> int:
    from cake.runs.rulestore import RuleStatus

    rule, store = _find(args)
    verb = "enabled" if active else "disabled"
    if rule.status is RuleStatus.REJECTED:
        raise UsageError(f"{rule.id} was rejected by its validation gate; it cannot be {verb}")
    status = RuleStatus.ACTIVE if active else RuleStatus.DISABLED
    updated = store.set_status(rule.id, status, f"{verb} with `cake rules`")
    print(f"{updated.id}: {updated.status.value} (revision {updated.revision})")
    return ExitCode.OK


def _disable(args: argparse.Namespace) -> int:
    return _set(args, active=False)


def _enable(args: argparse.Namespace) -> int:
    return _set(args, active=True)
