"""CAKE's contract-grade verifier: judges any Python callable against an op contract.

See README.md for the module map. Imports nothing from cake.ir, cake.lowering or cake.agents.
"""

from cake.verifier.battery import run_battery, run_gate
from cake.verifier.contracts import Contract, DimSpec, TensorSpec
from cake.verifier.gates import GATE_ORDER, ResourceReport, implausible_speed
from cake.verifier.inputs import Case, Layout, ValueFamily, materialize
from cake.verifier.registry import CONTRACTS, get_contract
from cake.verifier.results import Evidence, GateResult, GateStatus, Verdict

__all__ = [
    "CONTRACTS", "GATE_ORDER", "Case", "Contract", "DimSpec", "Evidence", "GateResult", "GateStatus", "Layout",
    "ResourceReport", "TensorSpec", "ValueFamily", "Verdict", "get_contract", "implausible_speed", "materialize",
    "run_battery", "run_gate",
]
