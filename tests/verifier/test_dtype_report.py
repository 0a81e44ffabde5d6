"""Per-dtype reporting of failing gates, and the tolerance model against sequential fp32 accumulation."""

from __future__ import annotations

import pytest
import torch
from cake.verifier.battery import run_battery, run_gate
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.results import GateStatus, Verdict
from torch import Tensor


def row_sum_off_in_fp32(x: Tensor) -> Tensor:
    """Correct in fp16/bf16, off by one in fp32 (as a TF32-only or fp32-path-only bug would be)."""
    y = x.float().sum(dim=-1)
    return (y + 1.0 if x.dtype == torch.float32 else y).to(x.dtype)


def test_failing_gate_names_the_failing_dtypes() -> None:
    result = run_gate("CMP-01", get_contract("row_sum"), row_sum_off_in_fp32)
    assert result.status is GateStatus.FAIL
    assert result.dtypes_run == ("float32", "float16", "bfloat16")
    assert result.dtypes_failed == ("float32",)
    assert result.dtype_summary() == "failed float32; passed float16, bfloat16"
    assert result.replay_token is not None and ":float32:" in result.replay_token


def test_dtypes_survive_the_verdict_json() -> None:
    verdict = run_battery(get_contract("row_sum"), row_sum_off_in_fp32, gates=["CMP-01", "PRC-01"], all_gates=True)
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict
    assert again.gate("PRC-01").dtypes_failed == ("float32",)


@pytest.mark.parametrize("op", ["matmul", "row_sum", "softmax"])
def test_sequential_fp32_accumulation_passes_long_reductions(op: str) -> None:
    """A plain loop with one fp32 accumulator per output (what a tiled GPU kernel does) stays within the
    committed tolerances at the long reduction (N ~ 4099)."""
    for gate in ("ORD-01", "CMP-01"):
        result = run_gate(gate, get_contract(op), get_controls(op).sequential, dtypes=["float32", "float16"])
        assert result.status is GateStatus.PASS, result.reason
