"""The rule store: versioned files per scope, statuses, overrides, atomic and idempotent writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cake.runs.rulestore import (
    FORMAT,
    RuleFileError,
    RuleStatus,
    RuleStore,
    Scope,
    UnknownRuleError,
    active_rule_data,
    effective_rules,
    run_rules_dir,
    scopes,
    user_rules_dir,
)

RULE = {"id": "L-abc123", "title": "learned: resource overflow smem", "message": "m",
        "predicate": {"all": [{"feature": "smem_bytes", "op": ">=", "value": 240000}]}}
PROV = {"source_candidates": [3, 4, 5], "count": 3}
OK = {"passed": True}


def test_save_creates_revision_one_and_reads_back(tmp_path: Path) -> None:
    store = RuleStore(tmp_path / "rules", Scope.RUN)
    stored = store.save("L-abc123", RULE, status=RuleStatus.ACTIVE, provenance=PROV, validation=OK, note="learned")
    assert stored.revision == 1 and stored.active
    again = store.get("L-abc123")
    assert again.rule["predicate"] == RULE["predicate"] and again.provenance == PROV and again.validation == OK
    assert [h["status"] for h in again.history] == ["active"]
    data = json.loads((tmp_path / "rules" / "L-abc123.json").read_text())
    assert data["format"] == FORMAT and data["status"] == "active"
    assert not list((tmp_path / "rules").glob("*.tmp"))


def test_a_rule_file_is_a_rules_file_the_checker_reads(tmp_path: Path) -> None:
    from cake.ir.rules import load_rules

    store = RuleStore(tmp_path, Scope.RUN)
    store.save("L-abc123", RULE, status=RuleStatus.ACTIVE, provenance=PROV, validation=OK, note="learned")
    (rule,) = load_rules(tmp_path / "L-abc123.json")
    assert rule.id == "L-abc123" and rule.enabled and rule.provenance["source_candidates"] == [3, 4, 5]
    assert rule.provenance["validation"] == OK
    store.set_status("L-abc123", RuleStatus.DISABLED, "off")
    assert not load_rules(tmp_path / "L-abc123.json")[0].enabled


def test_same_content_is_not_a_new_revision_but_a_change_is(tmp_path: Path) -> None:
    store = RuleStore(tmp_path, Scope.RUN)
    store.save("L-abc123", RULE, status=RuleStatus.ACTIVE, provenance=PROV, validation=OK, note="learned")
    same = store.save("L-abc123", RULE, status=RuleStatus.ACTIVE, provenance=PROV, validation=OK, note="again")
    assert same.revision == 1
    changed = store.save("L-abc123", RULE, status=RuleStatus.REJECTED, provenance=PROV,
                         validation={"passed": False}, note="gate failed")
    assert changed.revision == 2
    assert [h["status"] for h in changed.history] == ["active", "rejected"]


def test_disable_keeps_the_rule_and_its_history(tmp_path: Path) -> None:
    store = RuleStore(tmp_path, Scope.USER)
    store.save("L-abc123", RULE, status=RuleStatus.ACTIVE, provenance=PROV, validation=OK, note="learned")
    off = store.set_status("L-abc123", RuleStatus.DISABLED, "too broad")
    assert off.revision == 2 and off.status is RuleStatus.DISABLED and off.rule["predicate"] == RULE["predicate"]
    assert store.rules(RuleStatus.ACTIVE) == []
    assert [r.id for r in store.rules(RuleStatus.DISABLED)] == ["L-abc123"]


def test_run_scope_overrides_user_scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAKE_RULES_DIR", str(tmp_path / "user"))
    assert user_rules_dir() == tmp_path / "user"
    run_dir = tmp_path / "run"
    RuleStore.user().save("L-abc123", RULE, status=RuleStatus.ACTIVE, provenance=PROV, validation=OK, note="u")
    RuleStore.user().save("L-000001", {**RULE, "id": "L-000001"}, status=RuleStatus.ACTIVE, provenance=PROV,
                          validation=OK, note="u")
    assert [r["id"] for r in active_rule_data(run_dir)] == ["L-000001", "L-abc123"]
    run_store = RuleStore.for_run(run_dir)
    assert run_store.root == run_rules_dir(run_dir)
    run_store.save("L-abc123", RULE, status=RuleStatus.DISABLED, provenance=PROV, validation=OK, note="not here")
    merged = effective_rules(scopes(run_dir))
    assert {r.id: (r.scope, r.status) for r in merged} == {
        "L-000001": (Scope.USER, RuleStatus.ACTIVE), "L-abc123": (Scope.RUN, RuleStatus.DISABLED)}
    assert [r["id"] for r in active_rule_data(run_dir)] == ["L-000001"]
    assert [r["id"] for r in active_rule_data(None)] == ["L-000001", "L-abc123"]


def test_xdg_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CAKE_RULES_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert user_rules_dir() == tmp_path / "cake" / "rules"


def test_unknown_and_bad_files(tmp_path: Path) -> None:
    store = RuleStore(tmp_path, Scope.RUN)
    with pytest.raises(UnknownRuleError):
        store.get("L-nope")
    with pytest.raises(UnknownRuleError):
        store.get("../escape")
    (tmp_path / "L-bad.json").write_text("{not json")
    with pytest.raises(RuleFileError, match="L-bad.json"):
        store.rules()
    (tmp_path / "L-bad.json").write_text(json.dumps({"format": FORMAT + 1, "id": "L-bad"}))
    with pytest.raises(RuleFileError, match="newer"):
        store.get("L-bad")
    (tmp_path / "L-bad.json").write_text(json.dumps({"format": FORMAT, "rules": []}))
    with pytest.raises(RuleFileError, match="not a rule file"):
        store.get("L-bad")


def test_missing_directory_is_empty(tmp_path: Path) -> None:
    assert RuleStore(tmp_path / "absent", Scope.RUN).rules() == []
