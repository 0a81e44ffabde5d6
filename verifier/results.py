"""Typed results: what a gate says about a kernel, and what a battery says about all gates.

A `GateResult` is the unit of judgement. Its `status` is the only field a caller may branch on; `reason`
is for humans and `evidence` pins the worst element so a failure can be checked by hand. Every result that
is not a PASS or SKIP carries a replay token when a case produced it.

A case whose kernel call raised `cake.errors.ShapeNotSupported` is *refused*: not run and not judged. Each
gate counts its refused cases and keeps the distinct (shape, dtype, reason) triples as `Refusal`s; the
verdict lists them all, and `passed` needs CMP-01 to have judged at least one case of every dtype it ran,
so a kernel that refuses everything is never a pass.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass


class GateStatus(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"  # the kernel ran and violated the contract
    SKIP = "SKIP"  # the gate does not apply here; `reason` says why
    TIMEOUT = "TIMEOUT"  # set by the isolating worker; the library itself never times out
    RUNTIME_ERROR = "RUNTIME_ERROR"  # the kernel raised; never a pass

    @property
    def is_failure(self) -> bool:
        return self in _FAILURES


_FAILURES = frozenset({GateStatus.FAIL, GateStatus.TIMEOUT, GateStatus.RUNTIME_ERROR})


@dataclass(frozen=True, slots=True)
class Evidence:
    """The worst element of a failing case. `index` is into the named output (or input, for MUTATE)."""

    tensor: str
    index: tuple[int, ...]
    got: float | str
    expected: float | str
    error: float
    tolerance: float
    inputs_hash: str = ""
    note: str = ""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["index"] = list(self.index)
        return data

    @staticmethod
    def from_json(data: dict[str, object]) -> Evidence:
        fields = dict(data)
        fields["index"] = tuple(int(i) for i in fields["index"])  # type: ignore[attr-defined]
        return Evidence(**fields)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A shape the kernel refused (ShapeNotSupported): the case's dims, dtype, the kernel's reason, and the
    gates whose cases it refused."""

    dims: tuple[tuple[str, int], ...]
    dtype: str
    reason: str
    gates: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[tuple[tuple[str, int], ...], str, str]:
        return self.dims, self.dtype, self.reason

    def describe(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.dims)
        return f"{self.dtype} [{shape}]: {self.reason}"

    def to_json(self) -> dict[str, object]:
        return {"dims": {k: v for k, v in self.dims}, "dtype": self.dtype, "reason": self.reason,
                "gates": list(self.gates)}

    @staticmethod
    def from_json(data: dict[str, object]) -> Refusal:
        dims = data["dims"]
        assert isinstance(dims, dict), dims
        return Refusal(tuple(sorted((str(k), int(v)) for k, v in dims.items())), str(data["dtype"]),
                       str(data["reason"]), tuple(str(g) for g in data.get("gates", ())))  # type: ignore[attr-defined]


def merge_refusals(refusals: Iterable[Refusal]) -> tuple[Refusal, ...]:
    """One entry per (dims, dtype, reason), with the gates that met it, in first-seen order."""
    merged: dict[tuple[tuple[tuple[str, int], ...], str, str], Refusal] = {}
    for r in refusals:
        have = merged.get(r.key)
        gates = r.gates if have is None else have.gates + tuple(g for g in r.gates if g not in have.gates)
        merged[r.key] = Refusal(r.dims, r.dtype, r.reason, gates)
    return tuple(merged.values())


@dataclass(frozen=True, slots=True)
class GateResult:
    gate_id: str
    status: GateStatus
    reason: str
    evidence: Evidence | None = None
    replay_token: str | None = None
    cases_run: int = 0
    # Which dtypes the gate ran and which of them failed: a failing gate still runs the remaining dtypes
    # (each up to its first failing case), so "fails in fp32 only" and "fails in every dtype" differ here.
    dtypes_run: tuple[str, ...] = ()
    dtypes_failed: tuple[str, ...] = ()
    # Cases the kernel refused (ShapeNotSupported): not counted in `cases_run`; `dtypes_refused` are the
    # dtypes in which every case was refused (none judged).
    refused_cases: int = 0
    refusals: tuple[Refusal, ...] = ()
    dtypes_refused: tuple[str, ...] = ()

    def dtype_summary(self) -> str:
        """E.g. 'failed float32; passed float16, bfloat16' (empty when the gate ran no dtype)."""
        passed = [d for d in self.dtypes_run if d not in self.dtypes_failed]
        parts = ([f"failed {', '.join(self.dtypes_failed)}"] if self.dtypes_failed else []) + \
            ([f"passed {', '.join(passed)}"] if passed else [])
        return "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {
            "gate_id": self.gate_id,
            "status": self.status.value,
            "reason": self.reason,
            "evidence": self.evidence.to_json() if self.evidence else None,
            "replay_token": self.replay_token,
            "cases_run": self.cases_run,
            "dtypes_run": list(self.dtypes_run),
            "dtypes_failed": list(self.dtypes_failed),
            "refused_cases": self.refused_cases,
            "refusals": [r.to_json() for r in self.refusals],
            "dtypes_refused": list(self.dtypes_refused),
        }

    @staticmethod
    def from_json(data: dict[str, object]) -> GateResult:
        evidence = data.get("evidence")
        return GateResult(
            gate_id=str(data["gate_id"]),
            status=GateStatus(data["status"]),
            reason=str(data["reason"]),
            evidence=Evidence.from_json(evidence) if isinstance(evidence, dict) else None,
            replay_token=str(data["replay_token"]) if data.get("replay_token") else None,
            cases_run=int(data.get("cases_run", 0)),  # type: ignore[call-overload]
            dtypes_run=tuple(str(d) for d in data.get("dtypes_run", ())),  # type: ignore[attr-defined]
            dtypes_failed=tuple(str(d) for d in data.get("dtypes_failed", ())),  # type: ignore[attr-defined]
            refused_cases=int(data.get("refused_cases", 0)),  # type: ignore[call-overload]
            refusals=tuple(Refusal.from_json(r) for r in data.get("refusals", ())),  # type: ignore[attr-defined]
            dtypes_refused=tuple(str(d) for d in data.get("dtypes_refused", ())),  # type: ignore[attr-defined]
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """All gate results for one kernel against one contract. `passed` is true only when no gate failed,
    timed out or raised, and CMP-01 (when it ran) judged at least one case of every dtype it ran rather than
    having all of them refused; skipped gates and refused shapes (`refused`) do not fail a kernel but stay
    visible."""

    op: str
    passed: bool
    gates: tuple[GateResult, ...]
    refused: tuple[Refusal, ...] = ()

    @staticmethod
    def of(op: str, gates: tuple[GateResult, ...]) -> Verdict:
        passed = not any(g.status.is_failure for g in gates) and not _cmp01_all_refused(gates)
        return Verdict(op, passed, gates, merge_refusals(r for g in gates for r in g.refusals))

    @property
    def refused_summary(self) -> str:
        """E.g. 'refused 2 shape(s): bf16 [D=1031,...]: ...' (empty when nothing was refused)."""
        if not self.refused:
            return ""
        return f"refused {len(self.refused)} shape(s): " + "; ".join(r.describe() for r in self.refused)

    @property
    def failures(self) -> tuple[GateResult, ...]:
        return tuple(g for g in self.gates if g.status.is_failure)

    def gate(self, gate_id: str) -> GateResult:
        for result in self.gates:
            if result.gate_id == gate_id:
                return result
        raise KeyError(f"no result for gate {gate_id} in the verdict for {self.op}")

    def to_json(self) -> str:
        data = {"op": self.op, "passed": self.passed, "gates": [g.to_json() for g in self.gates],
                "refused": [r.to_json() for r in self.refused]}
        return json.dumps(data, indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Verdict:
        data = json.loads(text)
        gates = tuple(GateResult.from_json(g) for g in data["gates"])
        refused = tuple(Refusal.from_json(r) for r in data.get("refused", ()))
        return Verdict(op=data["op"], passed=bool(data["passed"]), gates=gates, refused=refused)


# The gate that must judge at least one supported case of each dtype for a verdict to pass.
SUPPORTED_CASE_GATE = "CMP-01"


def _cmp01_all_refused(gates: tuple[GateResult, ...]) -> bool:
    """True when CMP-01 ran and some dtype had every case refused (or the whole gate was refused)."""
    return any(g.gate_id == SUPPORTED_CASE_GATE and bool(g.dtypes_refused) for g in gates)
