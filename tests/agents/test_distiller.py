"""The distiller on a synthetic run in the real store: a recurring failure becomes one learned rule that the
checker then applies statically, every known-good schedule still passes, rejected proposals are kept."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cake.agents.distiller import (
    CALIBRATION_TARGETS,
    DistillSettings,
    active_specs,
    distill,
    load_calibration_targets,
    shipped_schedules,
)
from cake.agents.signatures import FailureKind, cluster, normalize_error, signature_of
from cake.agents.synthesis import Condition, synthesize
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.printer import print_kernel

from cake.cli import main
from cake.runs.rulestore import RuleStatus, RuleStore, active_rule_data
from cake.runs.store import CandidateStatus, Evaluation, FitnessKind, NewCandidate, RunStore, ir_hash

PLAIN = (Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / "assign_plain.cake").read_text()
ARCH = "sm_90a"
RES_REASON = "over the H100 budget: 288 registers/thread > 255"


@pytest.fixture(autouse=True)
def _isolated_user_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAKE_RULES_DIR", str(tmp_path / "user-rules"))


def variant(name: str, *, BN: int = 128, BK: int = 64, STAGES: int = 2, WARPS: int = 4) -> str:
    """assign_plain with other param defaults, in canonical text (what the loop stores)."""
    text = (PLAIN.replace("schedule assign_plain", f"schedule {name}")
            .replace("param BN = 128", f"param BN = {BN}").replace("param BK = 64", f"param BK = {BK}")
            .replace("param STAGES = 2", f"param STAGES = {STAGES}")
            .replace("param WARPS = 4", f"param WARPS = {WARPS}"))
    return print_kernel(parse(text, f"{name}.cake"))


def _verdict(gate: str, status: str, reason: str, token: str | None = None) -> dict[str, object]:
    return {"op": "kmeans_assign", "passed": status == "PASS", "gates": [
        {"gate_id": "RES-01", "status": "PASS", "reason": "ok", "evidence": None, "replay_token": None},
        {"gate_id": gate, "status": status, "reason": reason, "evidence": None, "replay_token": token}]}


def _evaluation(status: CandidateStatus, verdict: dict[str, object] | None, *, tokens: tuple[str, ...] = (),
                measured: float | None = None, error: str | None = None) -> Evaluation:
    return Evaluation(status=status, verdict=verdict, replay_tokens=tokens, timings={}, measured_ms=measured,
                      baseline_ms=1.5 if measured else None, fitness=1.5 / measured if measured else None,
                      fitness_kind=FitnessKind.MEASURED if measured else None, error=error, worker="cuda:0",
                      seconds=12.0)


# (name, params, evaluation, predicted_ms)
GOOD = [("good_wide", {"BN": 256, "WARPS": 8}, 1.0, 1.1), ("good_thin", {"WARPS": 2}, 2.0, 6.0),
        ("good_small", {"BN": 64, "BK": 128, "WARPS": 2}, 2.5, 2.4)]
# One family: wide tiles on two warps overflow the register file (RES-02), whatever BK.
OVERFLOW = [("ovf16", {"BN": 256, "WARPS": 2, "BK": 16}), ("ovf32", {"BN": 256, "WARPS": 2, "BK": 32}),
            ("ovf64", {"BN": 256, "WARPS": 2, "BK": 64})]
# A flaky-looking gate failure on schedules a shipped, verified schedule shares every fact with: no rule can
# separate it, so its proposal must be rejected by the gate (and kept as rejected).
FLAKY = [("flaky64", {}), ("flaky32", {"BK": 32}), ("flaky16", {"BK": 16})]


def make_run(root: Path) -> tuple[RunStore, dict[str, int]]:
    store = RunStore.create(root, {"arch": ARCH, "op": "kmeans_assign", "dims": {"B": 32, "N": 65536}})
    rows = [(name, params) for name, params, *_ in GOOD] + OVERFLOW + FLAKY
    texts = [variant(name, **params) for name, params in rows]
    predicted = {name: p for name, _, _, p in GOOD}
    ids = store.record_turn(1, [NewCandidate(ir_hash(t), t, name, (), "offline", "mutate", CandidateStatus.QUEUED,
                                             predicted_ms=predicted.get(name))
                                for t, (name, _) in zip(texts, rows, strict=True)], tokens=0)
    by_name = {name: i for (name, _), i in zip(rows, ids, strict=True)}
    for name, _, measured, _ in GOOD:
        store.record_evaluation(by_name[name], _evaluation(CandidateStatus.PASSED, _verdict("CMP-01", "PASS", "ok"),
                                                           measured=measured))
    for name, _ in OVERFLOW:
        store.record_evaluation(by_name[name], _evaluation(CandidateStatus.FAILED,
                                                           _verdict("RES-02", "FAIL", RES_REASON)))
    for i, (name, _) in enumerate(FLAKY):
        token = f"cake1:kmeans_assign:CMP-01:0:{i}:float32:cpu:N={37 + i}"
        store.record_evaluation(by_name[name], _evaluation(
            CandidateStatus.FAILED, _verdict("CMP-01", "FAIL", "max error 3.1 > 1e-3", token), tokens=(token,)))
    store.finish_turn(1)
    return store, by_name


def _learned(diags: tuple[object, ...]) -> list[str]:
    return [d.code for d in diags if d.code.startswith("L-") and d.is_error]  # type: ignore[attr-defined]


def test_recurring_failure_becomes_one_rule_applied_statically(tmp_path: Path) -> None:
    store, ids = make_run(tmp_path / "run")
    report = distill(store)
    assert len(report.learned) == 1, report.to_json()
    rule = RuleStore.for_run(store.root).get(report.learned[0].rule_id or "")
    assert rule.status is RuleStatus.ACTIVE and rule.validation["passed"] is True
    assert sorted(rule.provenance["source_candidates"]) == sorted(ids[n] for n, _ in OVERFLOW)
    assert rule.provenance["count"] == 3 and rule.provenance["signature"]["kind"] == "resource"
    assert rule.validation["failures_rejected"] == 3 and rule.validation["false_rejects"] == []
    assert "registers" in rule.rule["message"]

    specs = active_specs(RuleStore.for_run(store.root).rules())
    assert [s.id for s in specs] == [rule.id]
    # The same mistakes, and a new member of the family, are now rejected before any compiler runs ...
    for name, params in [*OVERFLOW, ("ovf128", {"BN": 256, "WARPS": 2, "BK": 128})]:
        assert _learned(check(parse(variant(name, **params)), arch=ARCH, rules=specs)) == [rule.id], name
    # ... and every known-good schedule still passes: the run's verified ones and every shipped one.
    for name, params, *_ in GOOD:
        assert _learned(check(parse(variant(name, **params)), arch=ARCH, rules=specs)) == [], name
    for good in shipped_schedules():
        assert _learned(check(good.kernel, rules=specs)) == [], good.name


def test_inseparable_cluster_is_kept_as_a_rejected_proposal(tmp_path: Path) -> None:
    store, _ = make_run(tmp_path / "run")
    report = distill(store)
    assert len(report.rejected) == 1
    rejected = RuleStore.for_run(store.root).rules(RuleStatus.REJECTED)
    assert len(rejected) == 1
    v = rejected[0].validation
    assert v["passed"] is False and "kmeans/assign_plain.cake" in " ".join(v["false_rejects"])
    assert rejected[0].provenance["signature"] == {"kind": "gate", "code": "CMP-01", "stage": "results"}
    assert rejected[0].id not in [r["id"] for r in active_rule_data(store.root)]


def test_distilling_again_changes_nothing(tmp_path: Path) -> None:
    store, _ = make_run(tmp_path / "run")
    distill(store)
    before = {p.name: p.read_text() for p in (store.root / "rules").iterdir()}
    again = distill(store)
    assert {p.name: p.read_text() for p in (store.root / "rules").iterdir()} == before
    assert again.learned == () and any(o.reason.startswith("already rejected by L-") for o in again.outcomes)
    assert again.mispredictions == 0


def test_threshold(tmp_path: Path) -> None:
    store, _ = make_run(tmp_path / "run")
    report = distill(store, settings=DistillSettings(threshold=4))
    assert report.outcomes == () and not (store.root / "rules").exists()


def test_mispredictions_become_calibration_targets(tmp_path: Path) -> None:
    store, ids = make_run(tmp_path / "run")
    assert distill(store).mispredictions == 1
    targets = load_calibration_targets(store.root)
    assert [t["candidate_id"] for t in targets] == [ids["good_thin"]]  # predicted 6.0 ms, measured 2.0 ms
    assert targets[0]["log_error"] == pytest.approx(math.log(3.0), abs=1e-3)
    assert targets[0]["arch"] == ARCH and (store.root / str(targets[0]["ir_path"])).is_file()
    assert len((store.root / CALIBRATION_TARGETS).read_text().splitlines()) == 1


# ---- signatures and synthesis --------------------------------------------------------------------------

def test_signatures_and_clusters(tmp_path: Path) -> None:
    store, ids = make_run(tmp_path / "run")
    rows = {r.id: r for r in store.candidates()}
    assert signature_of(rows[ids["good_wide"]], {}) is None
    res = signature_of(rows[ids["ovf16"]], {"a": 1})
    assert res is not None and res.kind is FailureKind.RESOURCE and res.code == "registers"
    assert res.resources == {"registers": 288}
    flaky = signature_of(rows[ids["flaky32"]], {"a": 1})
    assert flaky is not None and flaky.key == ("gate", "CMP-01") and flaky.shape == (("N", 38),)
    # Same key, two of three facts alike: one cluster per key.
    sigs = [s for s in (signature_of(r, {"x": 1, "y": 2, "z": r.id % 2}) for r in rows.values()) if s is not None]
    assert sorted(c.size for c in cluster(sigs)) == [3, 3]
    # Same key, unlike facts: two clusters.
    far = [s for s in (signature_of(rows[ids[n]], {"x": i, "y": i}) for i, (n, _) in enumerate(OVERFLOW)) if s]
    assert len(cluster(far)) == 3
    assert normalize_error("ptxas error: uses too much shared data (0x3a000 bytes, 232448 max) in `k_12`\nmore") \
        == "ptxas error: uses too much shared data (# bytes, # max) in _"


def test_synthesis_finds_a_smallest_separating_conjunction() -> None:
    fails = [{"smem": 240_000, "copy": "tma", "BN": 256}, {"smem": 250_000, "copy": "tma", "BN": 128}]
    goods = [{"smem": 200_000, "copy": "tma", "BN": 256}, {"smem": 245_000, "copy": "load", "BN": 128}]
    found = synthesize(fails, goods)
    assert found.separates and set(found.conditions) == {Condition("smem", ">=", 240_000),
                                                          Condition("copy", "==", "tma")}
    listed = synthesize([{"kinds": ("load", "tma")}, {"kinds": ("tma",)}], [{"kinds": ("load",)}])
    assert listed.conditions == (Condition("kinds", "contains", "tma"),)
    same = synthesize(fails[:1], [fails[0]])
    assert not same.separates and same.conditions


# ---- CLI --------------------------------------------------------------------------------------------------

def test_cli_distill_and_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = make_run(tmp_path / "run")
    store.close()
    run = str(tmp_path / "run")
    assert main(["distill", run]) == 0
    assert "1 rule(s) active, 1 rejected" in capsys.readouterr().out
    assert main(["distill", str(tmp_path / "nope")]) == 2
    assert main(["distill", run, "--json"]) == 0
    json.loads(capsys.readouterr().out)

    active = RuleStore.for_run(run).rules(RuleStatus.ACTIVE)[0].id
    rejected = RuleStore.for_run(run).rules(RuleStatus.REJECTED)[0].id
    assert main(["rules", "list", "--run", run]) == 0
    listed = capsys.readouterr().out
    assert active in listed and rejected not in listed
    assert main(["rules", "list", "--run", run, "--all"]) == 0 and rejected in capsys.readouterr().out
    assert main(["rules", "show", active, "--run", run]) == 0
    assert "validation: passed" in capsys.readouterr().out
    assert main(["rules", "show", "L-000000", "--run", run]) == 2

    bad = tmp_path / "ovf.cake"
    bad.write_text(variant("ovf", BN=256, WARPS=2, BK=128))
    good = tmp_path / "good.cake"
    good.write_text(variant("good", BN=256, WARPS=8))
    assert main(["rules", "test", active, str(bad), "--run", run]) == 1
    assert f"error[{active}]" in capsys.readouterr().out
    assert main(["rules", "test", active, str(good), "--run", run]) == 0
    assert main(["rules", "test", active, "--run", run]) == 0  # the run's verified + shipped schedules
    assert main(["rules", "test", rejected, "--run", run]) == 1  # it rejects a shipped schedule
    assert main(["rules", "test", active, str(tmp_path / "missing.cake"), "--run", run]) == 2

    assert main(["rules", "disable", active, "--run", run]) == 0
    assert active_rule_data(run) == []
    assert main(["rules", "disable", rejected, "--run", run]) == 2
    assert main(["rules", "enable", active, "--run", run]) == 0
    assert [r["id"] for r in active_rule_data(run)] == [active]


# ---- the evolve hook and the report ---------------------------------------------------------------------

def test_learned_rules_reach_the_validator_and_the_report(tmp_path: Path) -> None:
    from cake.agents.distiller import LearnedRules
    from cake.agents.validation import make_validator

    from cake.runs.rulestore import learned_rule_savings

    store, _ = make_run(tmp_path / "run")
    learned = LearnedRules(store.root)
    validate = make_validator(ARCH, None, learned.specs)
    # BN=256 on two warps at a BK whose accumulator fits the registers (E0307 rejects BK=128 by itself): only
    # the learned rule can reject it.
    mistake = variant("ovf", BN=256, WARPS=2, BK=32, STAGES=3)
    assert validate(mistake).errors == ()  # nothing learned yet
    report = learned.after_turn(store, 1)
    rule_id = report.learned[0].rule_id
    checked = validate(mistake)
    assert [d.code for d in checked.errors] == [rule_id]  # the next turn's checks include it
    assert validate(variant("fine", BN=256, WARPS=8)).errors == ()
    store.record_turn(2, [NewCandidate(ir_hash(checked.text), checked.text, "ovf", (), "offline", "mutate",
                                       CandidateStatus.REJECTED, tuple(d.to_json() for d in checked.diagnostics))],
                      tokens=0)
    savings = {t["turn"]: t for t in learned_rule_savings(store)}
    assert savings[1]["rejected_by_learned"] == 0
    assert savings[2] == {"turn": 2, "rejected_by_learned": 1, "evaluations_saved": 1, "gpu_seconds_saved": 12.0}
