"""The audit table: kernels judged by the KernelBench-style standard check and by the contract gates.

`AuditRow` is one kernel's two outcomes; `TwoByTwo` counts kernels per (standard, contract) cell — the
interesting one is "standard PASS, contract FAIL": kernels the usual check certifies that are broken.
`cake audit` prints them; `cake.verifier.worker.audit_in_worker` produces a row's inputs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from cake.verifier.results import Verdict


@dataclass(frozen=True, slots=True)
class AuditRow:
    kernel: str
    standard_passed: bool
    standard_reason: str
    verdict: Verdict

    @property
    def failed_gates(self) -> tuple[str, ...]:
        return tuple(g.gate_id for g in self.verdict.failures)

    def to_json(self) -> dict[str, object]:
        return {"kernel": self.kernel, "standard_passed": self.standard_passed,
                "standard_reason": self.standard_reason, "contract_passed": self.verdict.passed,
                "failed_gates": list(self.failed_gates), "verdict": json.loads(self.verdict.to_json())}


@dataclass(frozen=True, slots=True)
class TwoByTwo:
    """Counts of kernels by (standard check, contract gates) outcome."""

    std_pass_contract_pass: int
    std_pass_contract_fail: int
    std_fail_contract_pass: int
    std_fail_contract_fail: int

    @staticmethod
    def of(rows: Sequence[AuditRow]) -> TwoByTwo:
        cells = Counter((r.standard_passed, r.verdict.passed) for r in rows)
        return TwoByTwo(cells[True, True], cells[True, False], cells[False, True], cells[False, False])

    def to_json(self) -> dict[str, int]:
        return {"standard_pass_contract_pass": self.std_pass_contract_pass,
                "standard_pass_contract_fail": self.std_pass_contract_fail,
                "standard_fail_contract_pass": self.std_fail_contract_pass,
                "standard_fail_contract_fail": self.std_fail_contract_fail}

    def render(self) -> str:
        """Plain text, so tests can print it without rich."""
        return "\n".join([
            f"{'':18}{'contract PASS':>15}{'contract FAIL':>15}",
            f"{'standard PASS':18}{self.std_pass_contract_pass:>15}{self.std_pass_contract_fail:>15}",
            f"{'standard FAIL':18}{self.std_fail_contract_pass:>15}{self.std_fail_contract_fail:>15}",
        ])


def gate_failure_counts(rows: Sequence[AuditRow]) -> dict[str, int]:
    counts = Counter(gate for r in rows for gate in r.failed_gates)
    return dict(sorted(counts.items()))
