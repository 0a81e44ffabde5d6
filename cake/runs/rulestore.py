"""The rule store: learned static checks as versioned JSON files, per user and per run.

Two scopes hold rule files, one JSON file per rule (`<ID>.json`):

* **user** — `$CAKE_RULES_DIR`, else `$XDG_CONFIG_HOME/cake/rules`, else `~/.config/cake/rules`: rules a
  researcher keeps across runs;
* **run** — `RUN_DIR/rules`: what the distiller learned during that run (it never writes the user scope;
  `cake rules` can copy a run's rule there with `--promote`).

A file holds a status (`active`, `disabled`, or `rejected` — a proposal that failed its validation gate,
kept so it is not proposed again and so its evidence can be read), a `revision` that grows by one on every
change, the `history` of those changes, and the rule itself in the checker's format (`cake.ir.rules`) under
`rules: [...]`, with its provenance (source candidates, counts, when) and validation outcome inside the
rule's `provenance`, and `enabled` true only while the rule is active. So a rule file is also a rules file
the checker reads as is (`cake.ir.rules.load_rules`), and a disabled or rejected rule never fires there.
Files are written atomically (temporary file, then rename), so a killed run never leaves half a rule.

The store knows nothing about the IR: it holds JSON. `cake.ir.rules` turns `rule` into a check.
"""

from __future__ import annotations

import enum
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = 1  # the file layout's version; a newer file is refused rather than half-read
RULES_DIR_ENV = "CAKE_RULES_DIR"
RUN_RULES = "rules"


class RuleStatus(enum.Enum):
    ACTIVE = "active"  # loaded by the checker
    DISABLED = "disabled"  # switched off by a person; kept with its history
    REJECTED = "rejected"  # a proposal that failed its validation gate; never loaded


class Scope(enum.Enum):
    USER = "user"
    RUN = "run"


class RuleFileError(ValueError):
    """A rule file that cannot be read as a rule (bad JSON, missing fields, a newer format)."""


class UnknownRuleError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class StoredRule:
    """One rule file, read."""

    id: str
    revision: int
    status: RuleStatus
    rule: Mapping[str, Any]  # the checker's rule data (cake.ir.rules), `enabled` and `provenance` as written
    provenance: Mapping[str, Any]
    validation: Mapping[str, Any]
    history: tuple[Mapping[str, Any], ...]
    scope: Scope
    path: Path

    @property
    def active(self) -> bool:
        return self.status is RuleStatus.ACTIVE

    def to_json(self) -> dict[str, Any]:
        """The file: no top-level `id`, so `cake.ir.rules.load_rules` reads `rules` from it."""
        provenance = {**self.provenance, "validation": dict(self.validation)}
        rule = {**self.rule, "id": self.id, "enabled": self.active, "provenance": provenance}
        return {"format": FORMAT, "revision": self.revision, "status": self.status.value, "rules": [rule],
                "history": [dict(h) for h in self.history]}


def user_rules_dir() -> Path:
    """Where a user's rules live (the directory need not exist yet)."""
    explicit = os.environ.get(RULES_DIR_ENV)
    if explicit:
        return Path(explicit)
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "cake" / "rules"


def run_rules_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / RUN_RULES


class RuleStore:
    """The rule files of one scope, in one directory (created on the first write)."""

    def __init__(self, root: Path | str, scope: Scope):
        self.root = Path(root)
        self.scope = scope

    @staticmethod
    def user() -> RuleStore:
        return RuleStore(user_rules_dir(), Scope.USER)

    @staticmethod
    def for_run(run_dir: Path | str) -> RuleStore:
        return RuleStore(run_rules_dir(run_dir), Scope.RUN)

    def _path(self, rule_id: str) -> Path:
        if not rule_id or any(ch in rule_id for ch in "/\\") or rule_id.startswith("."):
            raise UnknownRuleError(f"`{rule_id}` is not a rule ID")
        return self.root / f"{rule_id}.json"

    # ------------------------------------------------------------------------------------ reads

    def rules(self, status: RuleStatus | None = None) -> list[StoredRule]:
        """Every rule file of this scope, by ID."""
        if not self.root.is_dir():
            return []
        out = [self._read(path) for path in sorted(self.root.glob("*.json"))]
        return [r for r in out if status is None or r.status is status]

    def get(self, rule_id: str) -> StoredRule:
        path = self._path(rule_id)
        if not path.is_file():
            raise UnknownRuleError(f"no rule `{rule_id}` in the {self.scope.value} rules ({self.root})")
        return self._read(path)

    def has(self, rule_id: str) -> bool:
        return self._path(rule_id).is_file()

    def _read(self, path: Path) -> StoredRule:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RuleFileError(f"{path.name}: not readable as JSON ({exc})") from None
        if not isinstance(data, dict):
            raise RuleFileError(f"{path.name}: a rule file holds one JSON object")
        if int(data.get("format", 0)) > FORMAT:
            raise RuleFileError(f"{path.name}: format {data['format']} is newer than this cake reads ({FORMAT})")
        try:
            (rule,) = data["rules"]
            provenance = dict(rule.get("provenance", {}))
            validation = dict(provenance.pop("validation", {}))
            return StoredRule(
                id=str(rule["id"]), revision=int(data["revision"]), status=RuleStatus(data["status"]),
                rule=dict(rule), provenance=provenance, validation=validation,
                history=tuple(dict(h) for h in data.get("history", ())), scope=self.scope, path=path)
        except (KeyError, TypeError, ValueError) as exc:
            raise RuleFileError(f"{path.name}: not a rule file ({type(exc).__name__}: {exc})") from None

    # ------------------------------------------------------------------------------------ writes

    def save(self, rule_id: str, rule: Mapping[str, Any], *, status: RuleStatus,
             provenance: Mapping[str, Any], validation: Mapping[str, Any], note: str) -> StoredRule:
        """Write a rule: a new file at revision 1, or the next revision of an existing one.

        Saving what is already stored (same rule, status and validation) changes nothing, so distilling a
        run twice leaves its rule files as they were."""
        previous = self.get(rule_id) if self.has(rule_id) else None
        if previous is not None and previous.status is status and _stable(previous.rule) == _stable(rule) and (
                _stable(previous.validation) == _stable(validation)
                and _stable(previous.provenance) == _stable(provenance)):
            return previous
        revision = 1 if previous is None else previous.revision + 1
        history = (previous.history if previous else ()) + (
            {"revision": revision, "status": status.value, "at": time.time(), "note": note},)
        stored = StoredRule(rule_id, revision, status, dict(rule), dict(provenance), dict(validation), history,
                            self.scope, self._path(rule_id))
        self._write(stored)
        return stored

    def set_status(self, rule_id: str, status: RuleStatus, note: str) -> StoredRule:
        """Change a rule's status (a new revision); the rule and its evidence stay."""
        current = self.get(rule_id)
        if current.status is status:
            return current
        revision = current.revision + 1
        history = current.history + ({"revision": revision, "status": status.value, "at": time.time(),
                                      "note": note},)
        stored = StoredRule(current.id, revision, status, current.rule, current.provenance, current.validation,
                            history, self.scope, current.path)
        self._write(stored)
        return stored

    def _write(self, stored: StoredRule) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = stored.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(stored.to_json(), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, stored.path)


_VOLATILE = frozenset({"at", "learned_at", "created_at", "enabled", "provenance", "validation"})


def _stable(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a rule says, without timestamps and without what the store itself writes into it."""
    return {k: v for k, v in data.items() if k not in _VOLATILE}


def effective_rules(stores: Iterable[RuleStore]) -> list[StoredRule]:
    """The rules that hold, later stores overriding earlier ones by ID (pass user, then run): a run can
    disable a user rule for itself. Every status is returned; filter with `.active`."""
    merged: dict[str, StoredRule] = {}
    for store in stores:
        for rule in store.rules():
            merged[rule.id] = rule
    return [merged[k] for k in sorted(merged)]


def scopes(run_dir: Path | str | None, *, user: bool = True) -> list[RuleStore]:
    """The stores that apply to a run (user first, then the run's own), or to no run."""
    out = [RuleStore.user()] if user else []
    if run_dir is not None:
        out.append(RuleStore.for_run(run_dir))
    return out


def active_rule_data(run_dir: Path | str | None, *, user: bool = True) -> list[Mapping[str, Any]]:
    """The checker data of every active rule for a run: what `cake evolve` and `cake check` load."""
    return [r.rule for r in effective_rules(scopes(run_dir, user=user)) if r.active]


# ---- what learned rules saved a run -------------------------------------------------------------------

LEARNED_PREFIX = "L-"


def is_learned(code: object) -> bool:
    return isinstance(code, str) and code.startswith(LEARNED_PREFIX)


def learned_rule_savings(store: Any) -> list[dict[str, Any]]:
    """Per turn of a run (`cake.runs.store.RunStore`): candidates rejected by learned rules, how many of them only
    a learned rule stopped (no built-in check objected: each is an evaluation the run did not spend, at most
    — it would have run only if ranked into the turn's top m), and the GPU seconds that saves, estimated
    from the evaluations the rule was learned from (their mean seconds)."""
    seconds: dict[str, float] = {}
    for rule in effective_rules(scopes(store.root)):
        seconds[rule.id] = float(rule.provenance.get("seconds_per_failure") or 0.0)
    out = []
    for turn in store.turns():
        rejected = only = 0
        saved_s = 0.0
        for row in store.candidates(turn=turn.turn):
            codes = {str(d.get("code")) for d in row.diagnostics if d.get("severity") == "error"}
            learned = {c for c in codes if is_learned(c)}
            if not learned:
                continue
            rejected += 1
            if learned == codes:
                only += 1
                saved_s += max(seconds.get(c, 0.0) for c in learned)
        out.append({"turn": turn.turn, "rejected_by_learned": rejected, "evaluations_saved": only,
                    "gpu_seconds_saved": round(saved_s, 3)})
    return out
