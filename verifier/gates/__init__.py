"""The gate registry: the paper's 12 contract gates plus the exploit gates, cheapest first.

Each gate has a stable ID and returns a `GateResult`. `GATE_ORDER` is the order a battery runs them in:
no-run and single-call gates first, so a broken kernel is usually rejected within a few calls.
"""

from __future__ import annotations

from cake.verifier.gates import correctness, exploits, ordering, precision, resources
from cake.verifier.gates.base import (
    BF16_INTERPRETER_SKIP,
    GATES,
    DimsProfile,
    DtypePolicy,
    Gate,
    GateContext,
    ResourceReport,
    get_gate,
)
from cake.verifier.gates.resources import implausible_speed, roofline_floor_s
from cake.verifier.results import Evidence, GateResult, GateStatus

GATE_ORDER: tuple[str, ...] = (
    "RES-02", "RES-01", "CMP-01", "MUTATE", "ALIAS", "POISON", "REUSE", "STREAM", "EXC-01", "EXC-02",
    "PRC-01", "PRC-02", "ORD-03", "ORD-01", "CMP-03", "ORD-02", "CMP-02",
)
CONTRACT_GATES: tuple[str, ...] = ("CMP-01", "CMP-02", "CMP-03", "ORD-01", "ORD-02", "ORD-03", "PRC-01", "PRC-02",
                                   "EXC-01", "EXC-02", "RES-01", "RES-02")
EXPLOIT_GATES: tuple[str, ...] = ("POISON", "MUTATE", "ALIAS", "REUSE", "STREAM")

assert set(GATE_ORDER) == set(GATES) == set(CONTRACT_GATES) | set(EXPLOIT_GATES), "GATE_ORDER must list every gate"
del correctness, exploits, ordering, precision, resources

__all__ = [
    "BF16_INTERPRETER_SKIP", "CONTRACT_GATES", "EXPLOIT_GATES", "GATES", "GATE_ORDER", "DimsProfile", "DtypePolicy", "Evidence",
    "Gate", "GateContext", "GateResult", "GateStatus", "ResourceReport", "get_gate", "implausible_speed",
    "roofline_floor_s",
]
