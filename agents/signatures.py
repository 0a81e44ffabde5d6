"""Failure signatures: what went wrong with an evaluated candidate, normalized so that repeats line up.

A signature has an exact part — the failure kind and its code (a gate ID, or the normalized first line of
a compile error) — and a fuzzy part: the candidate's IR facts (`cake.ir.rules.facts`), the compiler's
resource figures and the minimized failing shape. Clustering groups signatures with the same exact key
whose facts are alike, so one cluster is one recurring mistake, and the distiller can look for the IR
facts that all of its members share.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cake.ir.rules import FactValue
from cake.verifier.tokens import BadTokenError, ReplayToken

from cake.runs.store import CandidateRow, CandidateStatus

Facts = Mapping[str, FactValue]

# Two signatures with the same key belong together when this share of their facts agree.
DEFAULT_SIMILARITY = 0.6
RESOURCE_GATE = "RES-02"
_FAILED = ("FAIL", "TIMEOUT", "RUNTIME_ERROR")
# RES-02's reasons name the resource that overflowed (see cake.verifier.gates.resources).
_RESOURCE_WORDS = (("registers", "registers"), ("shared memory", "smem"), ("TMEM", "tmem"))


class FailureKind(enum.Enum):
    COMPILE_ERROR = "compile_error"  # lowering, compiling or loading failed (status ERROR)
    RESOURCE = "resource"  # RES-02: the compiler's resource report is over the target's budget
    RUNTIME_ERROR = "runtime_error"  # the kernel raised
    TIMEOUT = "timeout"  # the worker killed a kernel that ran too long
    GATE = "gate"  # a contract gate failed: wrong results

    @property
    def stage(self) -> str:
        """The pipeline stage a person would look at first."""
        return {FailureKind.COMPILE_ERROR: "compile", FailureKind.RESOURCE: "resources",
                FailureKind.RUNTIME_ERROR: "launch", FailureKind.TIMEOUT: "launch",
                FailureKind.GATE: "results"}[self]


@dataclass(frozen=True, slots=True)
class Signature:
    candidate_id: int
    kind: FailureKind
    code: str  # gate ID, overflowing resources, or a normalized compile error ("" when nothing finer)
    facts: Facts  # the IR facts of the candidate's kernel
    resources: Mapping[str, int]  # what the compiler reported, when the evaluation stored it
    shape: tuple[tuple[str, int], ...]  # the minimized failing dims, from a replay token
    detail: str  # one line for people: the gate's reason or the error's first line

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind.value, self.code)

    def describe(self) -> str:
        if self.kind is FailureKind.RESOURCE:
            return f"{self.code.replace('+', ' and ')} over the hardware budget (RES-02)"
        if self.kind is FailureKind.GATE:
            return f"contract gate {self.code} failed"
        what = {FailureKind.COMPILE_ERROR: "compile error", FailureKind.RUNTIME_ERROR: "the kernel raised",
                FailureKind.TIMEOUT: "the kernel timed out"}[self.kind]
        return f"{what}: {self.code}" if self.code else what


@dataclass(frozen=True, slots=True)
class Cluster:
    key: tuple[str, str]
    members: tuple[Signature, ...]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def candidate_ids(self) -> tuple[int, ...]:
        return tuple(s.candidate_id for s in self.members)

    @property
    def kind(self) -> FailureKind:
        return self.members[0].kind

    @property
    def code(self) -> str:
        return self.members[0].code


def normalize_error(text: str) -> str:
    """The first line of an error with its numbers, hex values and quoted names blanked, so that the
    same compiler complaint about different sizes or names reads the same."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"0x[0-9a-fA-F]+", "#", line)
    line = re.sub(r"\d[\d,_.]*", "#", line)
    line = re.sub(r"(`[^`]*`|'[^']*'|\"[^\"]*\")", "_", line)
    return line[:120]


def _failed_gates(verdict: Mapping[str, object] | None) -> list[Mapping[str, object]]:
    gates = (verdict or {}).get("gates", ())
    if not isinstance(gates, list | tuple):
        return []
    return [g for g in gates if isinstance(g, Mapping) and g.get("status") in _FAILED]


def _shape(tokens: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """The smallest failing dims among the replay tokens that carry minimized dims."""
    best: tuple[tuple[str, int], ...] = ()
    for text in tokens:
        try:
            dims = ReplayToken.decode(text).dims
        except BadTokenError:
            continue
        if dims and (not best or sum(v for _, v in dims) < sum(v for _, v in best)):
            best = dims
    return best


def _resources(timings: Mapping[str, float], reason: str) -> dict[str, int]:
    """The resource figures an evaluation stored (`resource.*` timings), else those RES-02 quoted."""
    out = {k.split(".", 1)[1]: int(v) for k, v in timings.items() if k.startswith("resource.")}
    if not out:
        for word, name in _RESOURCE_WORDS:
            m = re.search(r"([\d,]+) (?:bytes )?" + re.escape(word), reason)
            if m:
                out[name] = int(m.group(1).replace(",", ""))
    return out


def signature_of(row: CandidateRow, facts: Facts) -> Signature | None:
    """The signature of an evaluated candidate that failed; None for one that passed or was never run."""
    ev = row.evaluation
    if ev is None or row.status not in (CandidateStatus.FAILED, CandidateStatus.ERROR):
        return None
    shape = _shape(ev.replay_tokens)
    if row.status is CandidateStatus.ERROR:
        detail = (ev.error or "").strip()
        return Signature(row.id, FailureKind.COMPILE_ERROR, normalize_error(detail), facts,
                         _resources(ev.timings, ""), shape, detail.splitlines()[0][:200] if detail else "")
    failed = _failed_gates(ev.verdict)
    statuses = {str(g.get("status")) for g in failed}
    if "TIMEOUT" in statuses or "RUNTIME_ERROR" in statuses:
        # A kernel that hangs or raises does so on every gate: the gate that saw it first says nothing more.
        kind = FailureKind.TIMEOUT if "TIMEOUT" in statuses else FailureKind.RUNTIME_ERROR
        first = next(g for g in failed if g.get("status") in ("TIMEOUT", "RUNTIME_ERROR"))
        detail = str(first.get("reason", ev.error or ""))
        return Signature(row.id, kind, "", facts, _resources(ev.timings, ""), shape, detail[:200])
    res = next((g for g in failed if g.get("gate_id") == RESOURCE_GATE), None)
    if res is not None:
        reason = str(res.get("reason", ""))
        over = sorted(name for word, name in _RESOURCE_WORDS if word in reason)
        return Signature(row.id, FailureKind.RESOURCE, "+".join(over) or RESOURCE_GATE, facts,
                         _resources(ev.timings, reason), shape, reason[:200])
    if failed:
        gate = failed[0]
        return Signature(row.id, FailureKind.GATE, str(gate.get("gate_id")), facts, _resources(ev.timings, ""),
                         shape, str(gate.get("reason", ""))[:200])
    # Status FAILED without a failed gate: the evaluation's error is all there is.
    detail = (ev.error or "").strip()
    return Signature(row.id, FailureKind.RUNTIME_ERROR, normalize_error(detail), facts,
                     _resources(ev.timings, ""), shape, detail[:200])


def similarity(a: Facts, b: Facts) -> float:
    """The share of facts (over the union of names) on which two kernels agree."""
    names = set(a) | set(b)
    if not names:
        return 1.0
    return sum(1 for k in names if k in a and k in b and a[k] == b[k]) / len(names)


def cluster(signatures: Sequence[Signature], min_similarity: float = DEFAULT_SIMILARITY) -> list[Cluster]:
    """Group by exact key, then within a key by fact similarity to each group's first member.

    Deterministic: signatures are taken in the order given (candidate order), so re-clustering a run
    gives the same clusters."""
    groups: dict[tuple[str, str], list[list[Signature]]] = {}
    for sig in signatures:
        buckets = groups.setdefault(sig.key, [])
        home = next((b for b in buckets if similarity(b[0].facts, sig.facts) >= min_similarity), None)
        if home is None:
            buckets.append([sig])
        else:
            home.append(sig)
    return [Cluster(key, tuple(b)) for key in groups for b in groups[key]]
