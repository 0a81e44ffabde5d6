"""Learned rules: the predicate format, IR facts, loading, provenance, and running in the checker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake.ir.check import check
from cake.ir.checks.fixtures import CP_ASYNC, PINGPONG, PLAIN, TCGEN05
from cake.ir.checks.registry import CheckSpec, RegistryError
from cake.ir.parser import parse
from cake.ir.rules import (
    All,
    AnyOf,
    Leaf,
    Not,
    RuleFormatError,
    facts,
    load_rules,
    predicate_from_json,
    predicate_to_json,
    register_rules,
    rule_checks,
    rule_from_json,
    rule_to_json,
)

from cake.cli import main
from cake.diagnostics import Severity

RULE = {
    "id": "L-0001",
    "title": "cp.async on Hopper",
    "message": "cp.async copies on {target} ({smem_bytes} bytes of shared memory)",
    "predicate": {"all": [{"feature": "copy_kinds", "eq": "cp_async"}, {"feature": "target", "eq": "sm_90a"}]},
    "severity": "warning",
    "help": "use `via tma` with an mbarrier",
    "enabled": True,
    "provenance": {"candidates": ["run1/c0012", "run1/c0040"], "counts": {"failures": 9, "corpus": 120},
                   "validation": {"precision": 1.0, "false_positives": 0}, "created_at": "2026-11-30T12:00:00Z"},
}


def test_facts_of_the_pingpong_fixture() -> None:
    fx = facts(parse(PINGPONG, "p.cake"))
    assert fx["target"] == "sm_90a" and fx["op"] == "kmeans_assign"
    assert fx["param.BK"] == 128 and fx["stages"] == 4
    assert fx["smem_bytes"] == 65536 + 131072 + 2048 + 96 + 1024  # + the base-alignment slack
    assert fx["regs_total"] == 64512 and fx["regs_max"] == 232 and fx["threads"] == 384
    assert fx["copy_kinds"] == ("tma",) and fx["mma_forms"] == ("wgmma.m64n128k16",)
    assert fx["warp_specialized"] is True and fx["pingpong"] is True and fx["grid_kind"] == "persistent"
    assert fx["role_instances"] == 3 and fx["mbarriers"] == 12 and fx["masked_all"] is True


def test_facts_of_other_fixtures() -> None:
    assert facts(parse(TCGEN05, "t.cake"))["tmem_columns"] == 128
    assert facts(parse(CP_ASYNC, "c.cake"))["copy_kinds"] == ("cp_async",)
    plain = facts(parse(PLAIN, "p.cake"))
    assert plain["mma_families"] == ("dot",) and plain["warp_specialized"] is False
    assert "regs_total" not in plain  # no role declares regs
    assert plain["arch"] == "sm_90a" and facts(parse(PLAIN, "p.cake"), arch="sm_80")["arch"] == "sm_80"


def test_facts_leave_out_what_an_unbound_dim_hides() -> None:
    text = PINGPONG.replace("T[BN, 128]", "T[BN, D]").replace("dims B, N, K", "dims B, N, K, static D")
    fx = facts(parse(text, "p.cake"))
    assert "smem_bytes" not in fx
    assert facts(parse(text, "p.cake"), dims={"D": 128})["smem_bytes"] == 65536 + 131072 + 2048 + 96 + 1024


@pytest.mark.parametrize(("predicate", "expected"), [
    ({"feature": "smem_bytes", "op": ">", "value": 100000}, True),
    ({"feature": "smem_bytes", "gt": 300000}, False),
    ({"feature": "copy_kinds", "contains": "tma"}, True),
    ({"feature": "copy_kinds", "eq": "cp_async"}, False),
    ({"feature": "target", "in": ["sm_90a", "sm_100a"]}, True),
    ({"feature": "no_such_fact", "eq": 1}, False),
    ({"feature": "no_such_fact", "op": "exists"}, False),
    ({"not": {"feature": "pingpong", "eq": True}}, False),
    ({"any": [{"feature": "stages", "ge": 8}, {"feature": "regs_max", "le": 232}]}, True),
    ({"all": [{"feature": "stages", "ge": 4}, {"feature": "target", "ne": "sm_90a"}]}, False),
    ({"feature": "target", "gt": 3}, False),  # ordering a string fact never holds
])
def test_predicates(predicate, expected) -> None:
    fx = facts(parse(PINGPONG, "p.cake"))
    parsed = predicate_from_json(predicate)
    assert parsed.holds(fx) is expected
    assert predicate_from_json(predicate_to_json(parsed)) == parsed


def test_predicate_node_types() -> None:
    p = predicate_from_json({"all": [{"any": [{"feature": "a", "eq": 1}]}, {"not": {"feature": "b", "op": "exists"}}]})
    assert isinstance(p, All) and isinstance(p.parts[0], AnyOf) and isinstance(p.parts[1], Not)
    assert p.parts[1].part == Leaf("b", "exists")


@pytest.mark.parametrize(("bad", "match"), [
    ({**RULE, "id": "E0101"}, "look like L-0001"),
    ({**RULE, "predicate": {"feature": "x", "op": "~", "value": 1}}, "unknown op"),
    ({**RULE, "predicate": {"feature": "x"}}, "needs `op` and `value`"),
    ({**RULE, "predicate": {"all": []}}, "non-empty list"),
    ({**RULE, "predicate": {"feature": "x", "gt": "big"}}, "finite number"),
    ({**RULE, "severity": "fatal"}, "severity"),
    ({k: v for k, v in RULE.items() if k != "message"}, "missing message"),
    ([], "JSON object"),
])
def test_malformed_rules_are_refused_with_a_reason(bad, match) -> None:
    with pytest.raises(RuleFormatError, match=match):
        rule_from_json(bad)


def test_rule_round_trips_with_its_provenance() -> None:
    rule = rule_from_json(RULE)
    assert rule.provenance["counts"]["failures"] == 9
    assert rule_from_json(json.loads(json.dumps(rule_to_json(rule)))) == rule


def test_a_rule_runs_in_the_checker_with_its_message_and_severity() -> None:
    text = CP_ASYNC.replace("target sm_80", "target sm_90a")
    (d,) = [d for d in check(parse(text, "c.cake"), rules=rule_checks([rule_from_json(RULE)]), file="c.cake")]
    assert d.code == "L-0001" and d.severity is Severity.WARNING
    assert d.message == "cp.async copies on sm_90a (99328 bytes of shared memory)"  # 96 KB + 1 KB base slack
    assert d.label == "copy_kinds = {cp_async}; target = sm_90a"
    assert d.help == "use `via tma` with an mbarrier" and (d.span.line, d.span.column) == (1, 1)
    assert check(parse(CP_ASYNC, "c.cake"), rules=rule_checks([rule_from_json(RULE)])) == ()


def test_disabled_rules_do_not_run() -> None:
    assert rule_checks([rule_from_json({**RULE, "enabled": False})]) == ()


def test_load_rules_accepts_one_a_list_or_an_object(tmp_path: Path) -> None:
    for i, payload in enumerate((RULE, [RULE], {"rules": [RULE, {**RULE, "id": "L-0002"}]})):
        path = tmp_path / f"r{i}.json"
        path.write_text(json.dumps(payload))
        assert [r.id for r in load_rules(path)][0] == "L-0001"
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps([RULE, RULE]))
    with pytest.raises(RuleFormatError, match="twice"):
        load_rules(dup)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(RuleFormatError, match="not JSON"):
        load_rules(broken)


def test_register_rules_joins_a_registry_and_refuses_duplicates() -> None:
    registry: dict[str, CheckSpec] = {}
    (spec,) = register_rules([rule_from_json(RULE)], registry)
    assert registry == {"L-0001": spec} and spec.provenance == RULE["provenance"]
    with pytest.raises(RegistryError):
        register_rules([rule_from_json(RULE)], registry)


def test_cli_rules_and_list(tmp_path: Path, capsys) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{**RULE, "severity": "error"}]))
    schedule = tmp_path / "c.cake"
    schedule.write_text(CP_ASYNC.replace("target sm_80", "target sm_90a"))
    assert main(["check", str(schedule), "--rules", str(rules)]) == 1
    assert "error[L-0001]" in capsys.readouterr().out
    assert main(["check", "--list", "--rules", str(rules)]) == 0
    assert "L-0001" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    assert main(["check", str(schedule), "--rules", str(bad)]) == 2
