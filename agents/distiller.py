"""The distiller: recurring failures of a run become learned static checks and calibration targets.

    report = distill(RunStore.open(run_dir))               # what `cake distill RUN_DIR` does

1. Every evaluated candidate that failed (a gate, a timeout, a raise, a compile error, a RES-02 resource
   overflow) gets a signature (`cake.agents.signatures`); signatures are clustered.
2. A cluster that recurs (`threshold` members, default 3) gets a candidate rule: the smallest conjunction
   of IR-fact conditions true for all its members and false for every known-good schedule
   (`cake.agents.synthesis`), written as data the checker loads (`cake.ir.rules`).
3. The gate: the rule, loaded by the real checker, must reject every failure it came from and accept every
   known-good schedule — the run's verified candidates and every schedule shipped under `experiments/`.
   It is stored in the run's rule store as `active` if it does, `rejected` (with the evidence) if not.
4. Evaluations whose cost-model prediction was far off (|log(predicted / measured)| above a threshold)
   are appended to `RUN_DIR/calibration_targets.jsonl` for the cost model's calibration.

Distilling is idempotent: a cluster already rejected by an active rule is not proposed again, a rule
file is rewritten only when its content changes, and a misprediction is recorded once.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake.agents.signatures import DEFAULT_SIMILARITY, Cluster, Facts, Signature, cluster, signature_of
from cake.agents.synthesis import DEFAULT_MAX_CONDITIONS, Condition, synthesize, text
from cake.ir import rules as engine
from cake.ir.check import run_one
from cake.ir.checks.context import CheckContext
from cake.ir.checks.registry import CheckSpec
from cake.ir.nodes import Kernel
from cake.ir.parser import parse

from cake.diagnostics import Diagnostic, DiagnosticError
from cake.runs.rulestore import RuleStatus, RuleStore, StoredRule, effective_rules, scopes
from cake.runs.store import CandidateRow, CandidateStatus, FitnessKind, RunStore

DEFAULT_THRESHOLD = 3
# A prediction off by more than 2x either way is a calibration target (the model exists to rank).
DEFAULT_MISPREDICTION = math.log(2.0)
CALIBRATION_TARGETS = "calibration_targets.jsonl"
EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"


@dataclass(frozen=True, slots=True)
class DistillSettings:
    threshold: int = DEFAULT_THRESHOLD  # members a cluster needs before a rule is proposed
    min_similarity: float = DEFAULT_SIMILARITY
    max_conditions: int = DEFAULT_MAX_CONDITIONS
    misprediction_log_error: float = DEFAULT_MISPREDICTION


@dataclass(frozen=True, slots=True)
class KnownGood:
    """A schedule that must stay legal: a verified candidate of the run, or a shipped one."""

    name: str  # `candidate 12` or `experiments/kmeans/assign_plain.cake`
    kernel: Kernel
    arch: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one recurring cluster."""

    rule_id: str | None
    status: RuleStatus | None  # None: no rule was proposed (see `reason`)
    key: tuple[str, str]
    candidate_ids: tuple[int, ...]
    conditions: tuple[Condition, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class DistillReport:
    failures: int  # failed evaluations with a signature
    clusters: int
    outcomes: tuple[Outcome, ...]  # one per cluster at or over the threshold
    mispredictions: int  # new calibration targets written
    seconds: float

    @property
    def learned(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status is RuleStatus.ACTIVE)

    @property
    def rejected(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status is RuleStatus.REJECTED)

    def to_json(self) -> dict[str, object]:
        return {"failures": self.failures, "clusters": self.clusters, "mispredictions": self.mispredictions,
                "seconds": round(self.seconds, 3), "outcomes": [
                    {"rule": o.rule_id, "status": o.status.value if o.status else None, "key": list(o.key),
                     "candidates": list(o.candidate_ids), "when": [engine.predicate_to_json(c) for c in o.conditions],
                     "reason": o.reason} for o in self.outcomes]}


@dataclass
class _Corpus:
    """Facts of the kernels the gate uses, computed once per distill."""

    goods: list[KnownGood] = field(default_factory=list)
    good_facts: list[Facts] = field(default_factory=list)


def run_arch(store: RunStore) -> str | None:
    arch = store.config.get("arch")
    return str(arch) if arch else None


def shipped_schedules(root: Path = EXPERIMENTS_DIR) -> list[KnownGood]:
    """Every `.cake` schedule under experiments/ (evolve runs' candidates live in results/: records, failed
    ones among them, not known-good schedules), each for its own target. A shipped file that does not
    parse is a bug in the repository, raised loudly rather than silently dropped from the gate."""
    from cake.experiments.schedules import shipped_schedule_paths

    out = []
    for path in shipped_schedule_paths(root):
        kernel = parse(path.read_text(), path.name)
        out.append(KnownGood(str(path.relative_to(root.parent)), kernel, kernel.target))
    return out


def known_good(store: RunStore, arch: str | None) -> list[KnownGood]:
    """The run's verified candidates (at the run's arch) and the shipped schedules."""
    out = []
    for row in store.candidates(status=CandidateStatus.PASSED):
        kernel = _kernel(row)
        if kernel is not None:
            out.append(KnownGood(f"candidate {row.id}", kernel, arch or kernel.target))
    return out + shipped_schedules()


def _kernel(row: CandidateRow) -> Kernel | None:
    try:
        return parse(row.ir_text, f"candidate-{row.id}.cake")
    except DiagnosticError:
        return None


def distill(store: RunStore, *, settings: DistillSettings = DistillSettings(),
            rules: RuleStore | None = None, goods: Sequence[KnownGood] | None = None,
            extra_rules: Sequence[CheckSpec] = ()) -> DistillReport:
    """Distil `store`'s failures into rules in `rules` (default: the run's own rule store).

    `extra_rules` are rules already active elsewhere (the user's): a cluster they already reject is not
    proposed again."""
    started = time.monotonic()
    rules = rules or RuleStore.for_run(store.root)
    arch = run_arch(store)
    kernels: dict[int, tuple[Kernel, str]] = {}
    signatures: list[Signature] = []
    for row in store.candidates():
        if row.status not in (CandidateStatus.FAILED, CandidateStatus.ERROR) or row.evaluation is None:
            continue
        kernel = _kernel(row)
        if kernel is None:
            continue
        target = arch or kernel.target
        sig = signature_of(row, engine.facts(kernel, target))
        if sig is not None:
            signatures.append(sig)
            kernels[row.id] = (kernel, target)
    clusters = cluster(signatures, settings.min_similarity)
    recurring = [c for c in clusters if c.size >= settings.threshold]
    outcomes: list[Outcome] = []
    if recurring:
        corpus = _Corpus(list(goods) if goods is not None else known_good(store, arch))
        corpus.good_facts = [engine.facts(g.kernel, g.arch) for g in corpus.goods]
        active = [*extra_rules, *active_specs(rules.rules(RuleStatus.ACTIVE))]
        for c in recurring:
            outcomes.append(_propose(store, c, kernels, corpus, active, rules, settings))
    written = record_mispredictions(store, settings.misprediction_log_error)
    report = DistillReport(len(signatures), len(clusters), tuple(outcomes), written, time.monotonic() - started)
    store.log("distill", json.dumps(report.to_json(), sort_keys=True))
    return report


def _findings(spec: CheckSpec, kernel: Kernel, arch: str, file: str = "<gate>") -> list[Diagnostic]:
    """The errors the checker reports for `kernel` on `arch` when it runs only `spec`."""
    return [d for d in run_one(spec, CheckContext(kernel, arch, None), file) if d.code == spec.id and d.is_error]


def _rejects(spec: CheckSpec, kernel: Kernel, arch: str) -> bool:
    return bool(_findings(spec, kernel, arch))


def gate_rule(data: Mapping[str, object], goods: Sequence[KnownGood]) -> list[tuple[str, list[Diagnostic]]]:
    """The schedules among `goods` that the rule `data` rejects, with its diagnostics."""
    spec = engine.as_check(engine.rule_from_json(dict(data)))
    out = []
    for g in goods:
        found = _findings(spec, g.kernel, g.arch, Path(g.name).name)
        if found:
            out.append((g.name, found))
    return out


def _propose(store: RunStore, c: Cluster, kernels: Mapping[int, tuple[Kernel, str]], corpus: _Corpus,
             active: Sequence[CheckSpec], rules: RuleStore, settings: DistillSettings) -> Outcome:
    members = [kernels[i] for i in c.candidate_ids]
    for spec in active:
        if all(_rejects(spec, k, a) for k, a in members):
            return Outcome(spec.id, None, c.key, c.candidate_ids, (), f"already rejected by {spec.id}")
    found = synthesize([s.facts for s in c.members], corpus.good_facts, settings.max_conditions)
    if not found.conditions:
        return Outcome(None, None, c.key, c.candidate_ids, (), found.reason)
    data = rule_data(c, found.conditions)
    spec = engine.as_check(engine.rule_from_json(data))
    # The gate runs the checker itself, not the synthesis's own reading of the facts.
    missed = [i for i, (k, a) in zip(c.candidate_ids, members, strict=True) if not _rejects(spec, k, a)]
    false_rejects = [g.name for g in corpus.goods if _rejects(spec, g.kernel, g.arch)]
    passed = not missed and not false_rejects
    validation = {
        "passed": passed, "failures": c.size, "failures_rejected": c.size - len(missed), "missed": missed,
        "known_good": len(corpus.goods), "known_good_accepted": len(corpus.goods) - len(false_rejects),
        "false_rejects": false_rejects, "synthesis": found.reason, "at": time.time()}
    provenance = {
        "run": str(store.root), "source_candidates": list(c.candidate_ids), "count": c.size,
        "signature": {"kind": c.kind.value, "code": c.code, "stage": c.kind.stage},
        "example": c.members[0].detail, "shape": dict(c.members[0].shape),
        "seconds_per_failure": _mean_seconds(store, c.candidate_ids), "learned_at": time.time()}
    status = RuleStatus.ACTIVE if passed else RuleStatus.REJECTED
    stored = rules.save(str(data["id"]), data, status=status, provenance=provenance, validation=validation,
                        note="learned" if passed else "rejected by the validation gate")
    reason = found.reason if passed else _why_rejected(missed, false_rejects)
    return Outcome(stored.id, stored.status, c.key, c.candidate_ids, found.conditions, reason)


def _why_rejected(missed: Sequence[int], false_rejects: Sequence[str]) -> str:
    parts = []
    if missed:
        parts.append(f"misses {len(missed)} of its own failures")
    if false_rejects:
        shown = ", ".join(false_rejects[:3]) + (" ..." if len(false_rejects) > 3 else "")
        parts.append(f"rejects {len(false_rejects)} known-good schedule(s): {shown}")
    return "; ".join(parts)


def _mean_seconds(store: RunStore, ids: Sequence[int]) -> float:
    secs = [row.evaluation.seconds for row in (store.candidate(i) for i in ids) if row.evaluation]
    return sum(secs) / len(secs) if secs else 0.0


# ---- rule data ----------------------------------------------------------------------------------------

def rule_id(key: tuple[str, str], conditions: Sequence[Condition]) -> str:
    """A stable ID from what the rule says: learning the same rule twice gives the same file."""
    import hashlib

    said = json.dumps([list(key), [engine.predicate_to_json(c) for c in conditions]], sort_keys=True)
    return "L-" + hashlib.sha256(said.encode()).hexdigest()[:6]


def rule_data(c: Cluster, conditions: Sequence[Condition]) -> dict[str, object]:
    """The checker's data for a rule proposed from cluster `c` (the format of `cake.ir.rules`)."""
    sig = c.members[0]
    when = " and ".join(text(cond) for cond in conditions)
    what = sig.describe()
    subject = _subject(sig, conditions)
    return {
        "id": rule_id(c.key, conditions),
        "title": f"learned: {what} at the {sig.kind.stage} stage",
        "message": f"{what} in {c.size} evaluated candidates with {when} (stage: {sig.kind.stage}; "
                   f"look at {subject})",
        "predicate": engine.predicate_to_json(engine.All(tuple(conditions))),
        "severity": "error",
        "help": f"change the schedule so that not all of these hold: {when}",
    }


def _subject(sig: Signature, conditions: Sequence[Condition]) -> str:
    """The role, resource or stage a person should look at: the resource that overflowed, else the
    facts the rule tests."""
    if sig.code and sig.kind.value == "resource":
        return sig.code.replace("+", " and ")
    return ", ".join(dict.fromkeys(c.feature for c in conditions))


# ---- mispredictions -----------------------------------------------------------------------------------

def record_mispredictions(store: RunStore, log_error: float = DEFAULT_MISPREDICTION) -> int:
    """Append each measured evaluation whose prediction is off by more than `log_error` (natural log of
    the ratio) to RUN_DIR/calibration_targets.jsonl, once. Returns how many were new.

    A line holds what `cake.ir.cost_calibration.load_calibration_targets` needs to re-predict the schedule:
    the IR hash (the text is RUN_DIR/candidates/HASH.cake), the arch, the device and toolchain that
    measured it, the shape and dtype it was timed at (the config's, else the workload's fitness shape),
    the worker, and both times."""
    path = store.root / CALIBRATION_TARGETS
    seen = set()
    if path.exists():
        seen = {json.loads(line)["candidate_id"] for line in path.read_text().splitlines() if line.strip()}
    config = store.config
    dims, dtype = _timed_shape(config)
    device, toolchain = _measuring_machine()
    new = []
    for row in store.candidates():
        ev = row.evaluation
        if (ev is None or row.id in seen or ev.fitness_kind is not FitnessKind.MEASURED
                or not row.predicted_ms or not ev.measured_ms):
            continue
        err = math.log(row.predicted_ms / ev.measured_ms)
        if abs(err) <= log_error:
            continue
        new.append({"candidate_id": row.id, "ir_hash": row.ir_hash, "ir_path": f"candidates/{row.ir_hash}.cake",
                    "arch": config.get("arch"), "dims": dims, "dtype": dtype, "device": device,
                    "toolchain": toolchain,
                    "worker": ev.worker, "predicted_ms": row.predicted_ms, "measured_ms": ev.measured_ms,
                    "log_error": round(err, 4), "status": row.status.value})
    if new:
        with path.open("a") as fh:
            for entry in new:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
    return len(new)


def _timed_shape(config: dict[str, Any]) -> tuple[dict[str, int] | None, str | None]:
    """The dims and IR dtype a run's candidates were timed at: the config's when it names them, else the
    workload's fitness shape for the run's op (what `cake evolve` times)."""
    if config.get("dims") and config.get("dtype"):
        return dict(config["dims"]), str(config["dtype"])
    if not config.get("workload") or not config.get("op"):
        return None, None
    from cake.experiments.workload import get_workload

    shape = get_workload(str(config["workload"])).fitness_shape(str(config["op"]))
    return shape.dim_map, shape.ir_dtype


def _measuring_machine() -> tuple[str | None, str]:
    """The `cake.arch` device of this process's GPU (None without one) and the toolchain id. Measured
    evaluations are timed by this process's machine, the one the distiller runs on between turns."""
    import torch
    from cake.ir.cost_calibration import toolchain_id

    from cake.arch import match_device

    spec = match_device(torch.cuda.get_device_name()) if torch.cuda.is_available() else None
    return (spec.name if spec else None), toolchain_id()


def load_calibration_targets(run_dir: Path | str) -> list[dict[str, object]]:
    path = Path(run_dir) / CALIBRATION_TARGETS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---- the loop's hook ----------------------------------------------------------------------------------

def active_specs(stored: Sequence[StoredRule]) -> tuple[CheckSpec, ...]:
    """Checker entries for the active rules among `stored` (pass to `check(..., rules=...)`)."""
    return engine.rule_checks(engine.rule_from_json(dict(r.rule)) for r in stored if r.active)


class LearnedRules:
    """The hook `cake evolve` uses: the active rules of a run (the user's and the run's own) for the
    checker, and a distill after every finished turn so that the next turn's checks include what was
    just learned."""

    def __init__(self, run_dir: Path | str, settings: DistillSettings = DistillSettings(), *, user: bool = True):
        self.run_dir = Path(run_dir)
        self.settings = settings
        self.user = user
        self._specs = self._load()

    def _load(self) -> tuple[CheckSpec, ...]:
        return active_specs(effective_rules(scopes(self.run_dir, user=self.user)))

    def specs(self) -> tuple[CheckSpec, ...]:
        """The active rules now (pass as `make_validator(..., rules=learned.specs)`)."""
        return self._specs

    def after_turn(self, store: RunStore, turn: int) -> DistillReport:
        user_specs = active_specs(RuleStore.user().rules()) if self.user else ()
        report = distill(store, settings=self.settings, extra_rules=user_specs)
        self._specs = self._load()
        return report
