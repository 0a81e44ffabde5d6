"""Every shipped schedule (experiments/**/*.cake) and every fixture either lowers to Triton and matches its
op's fp64 reference under the CPU interpreter, or is refused by a backend-capability diagnostic."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cake.verifier.registry import get_contract
from lowering_cases import (
    BF16_SKIP,
    CAPABILITY_PREFIX,
    fixture_schedules,
    lower_schedule,
    run_against_reference,
    schedule_id,
    shipped_schedules,
)

SCHEDULES = shipped_schedules() + fixture_schedules()


def test_there_are_schedules_to_lower() -> None:
    assert any(p.name == "assign_plain.cake" for p in SCHEDULES)


@pytest.mark.parametrize("path", SCHEDULES, ids=schedule_id)
def test_signature_follows_the_contract(path: Path) -> None:
    from cake.experiments.workload import schedule_loader_for
    from cake.ir.nodes import Direction
    from cake.lowering.runtime import read_schedule

    kernel, _ = read_schedule(path)
    contract = get_contract(kernel.op)
    ins = [t.name for t in kernel.tensors if t.direction is not Direction.OUT]
    outs = [t.name for t in kernel.tensors if t.direction is Direction.OUT]
    if schedule_loader_for(kernel.op) is not None:
        # The workload adapts its schedules to the contract's signature (e.g. KDA: a zero initial state, one
        # launch per varlen sequence); the adapter is tested with its workload, against the contract's gates.
        assert len(ins) <= len(contract.inputs) and len(outs) == len(contract.outputs)
        return
    assert ins == [s.name for s in contract.inputs], "the callable takes the `in` tensors in declaration order"
    assert len(outs) == len(contract.outputs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("path", SCHEDULES, ids=schedule_id)
def test_lowered_schedule_matches_reference(path: Path, dtype: torch.dtype, interpreter: None) -> None:
    lowered = lower_schedule(path)
    if lowered.refusal is not None:
        codes = {d.code for d in lowered.refusal.diagnostics}
        assert all(code.startswith(CAPABILITY_PREFIX) for code in codes), codes
        pytest.skip(f"refused by the Triton capability checks: {', '.join(sorted(codes))}")
    if dtype == torch.bfloat16:
        pytest.skip(BF16_SKIP)
    assert run_against_reference(lowered, dtype) == 3
