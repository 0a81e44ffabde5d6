"""Typed results: what a gate says about a kernel, and what a battery says about all gates.

A `GateResult` is the unit of judgement. Its `status` is the only field a caller may branch on; `reason`
is for humans and `evidence` pins the worst element so a failure can be checked by hand. Every result that
is not a PASS or SKIP carries a replay token when a case produced it.

A case whose kernel call raised `cake.errors.ShapeNotSupported` is *refused*: not run and not judged. Each
gate counts its refused cases and keeps the distinct (shape, dtype, reason) triples as `Refusal`s; the
verdict lists them all, and `passed` needs CMP-01 to have judged at least one case of every dtype it ran,
so a kernel that refuses everything is never a pass.

A refusal must depend only on the shape: each gate also records the distinct (dims, dtype) pairs it ran
(`judged`), and `Verdict.of` fails every gate that refused a pair some gate of the battery (itself included)
ran — e.g. a kernel that refuses only the NaN cases of EXC-01 at a shape CMP-01 judged. The refusing gate is
the one blamed, whatever the battery order: it is the one whose refusal the other run contradicts.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace


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


Dims = tuple[tuple[str, int], ...]
# A (dims, dtype) pair: what a refusal may depend on.
Shape = tuple[Dims, str]


def describe_dims(dims: Dims) -> str:
    return ",".join(f"{k}={v}" for k, v in dims)


def _shape_to_json(shape: Shape) -> dict[str, object]:
    return {"dims": {k: v for k, v in shape[0]}, "dtype": shape[1]}


def _shape_from_json(data: dict[str, object]) -> Shape:
    dims = data["dims"]
    assert isinstance(dims, dict), dims
    return tuple(sorted((str(k), int(v)) for k, v in dims.items())), str(data["dtype"])


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
        return f"{self.dtype} [{describe_dims(self.dims)}]: {self.reason}"

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
    # The distinct (dims, dtype) pairs of the cases the gate ran (judged, passed or failed), in first-run
    # order: what the verdict checks refusals against. A few dozen at most per gate.
    judged: tuple[Shape, ...] = ()

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
            "judged": [_shape_to_json(s) for s in self.judged],
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
            judged=tuple(_shape_from_json(s) for s in data.get("judged", ())),  # type: ignore[attr-defined]
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """All gate results for one kernel against one contract. `passed` is true only when no gate failed,
    timed out or raised, and CMP-01 (when it ran) judged at least one case of every dtype it ran rather than
    having all of them refused; skipped gates and refused shapes (`refused`) do not fail a kernel but stay
    visible. `of` fails a gate that refused a (dims, dtype) pair some gate ran (see the module docstring)."""

    op: str
    passed: bool
    gates: tuple[GateResult, ...]
    refused: tuple[Refusal, ...] = ()

    @staticmethod
    def of(op: str, gates: tuple[GateResult, ...]) -> Verdict:
        # Here, where both the in-process battery and the worker's parent assemble the verdict.
        gates = enforce_shape_only_refusals(gates)
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


# The reason of a gate whose refusal another run contradicts (see the module docstring).
SHAPE_ONLY_RULE = "a refusal must depend only on the shape"


def enforce_shape_only_refusals(gates: tuple[GateResult, ...]) -> tuple[GateResult, ...]:
    """Fail every gate that refused a (dims, dtype) pair that a gate of `gates` ran. A gate that already
    failed keeps its own result (its reason and replay token reproduce a case; the verdict fails anyway).
    The FAIL carries no replay token: it is a fact about two runs, not one case; the evidence names both."""
    ran_by: dict[Shape, str] = {}  # each judged pair -> the first gate, in battery order, that ran it
    for gate in gates:
        for shape in gate.judged:
            ran_by.setdefault(shape, gate.gate_id)
    return tuple(_contradicted(gate, ran_by) for gate in gates)


def _contradicted(gate: GateResult, ran_by: dict[Shape, str]) -> GateResult:
    clashes = [r for r in gate.refusals if (r.dims, r.dtype) in ran_by]
    if not clashes or gate.status.is_failure:
        return gate
    first = clashes[0]
    runner = ran_by[(first.dims, first.dtype)]
    more = f" ({len(clashes) - 1} more such refusal(s))" if len(clashes) > 1 else ""
    reason = (f"refused shape [{describe_dims(first.dims)}] dtype {first.dtype} that gate {runner} ran: "
              f"{SHAPE_ONLY_RULE}{more}; the kernel said: {first.reason}")
    evidence = Evidence("shape", (), f"refused: {first.reason}", f"ran by {runner}", float("inf"), 0.0,
                        note=f"[{describe_dims(first.dims)}] {first.dtype}")
    failed = tuple(dict.fromkeys(r.dtype for r in clashes))
    return replace(gate, status=GateStatus.FAIL, reason=reason, evidence=evidence, replay_token=None,
                   dtypes_failed=failed)
