"""Issue 14: kda_forward's tolerance holds for correct kernels under every calibrated seed and still tests something.

The model's input-rounding term (reference.kda_core_rounding) covers what correct kernels round to the input dtype,
so the calibrated bf16/fp16 coefficients are O(1) (they were 1568 and 373 with fp32 rounding alone, a bf16
tolerance of ~12 |ref| on o); these tests hold every correct control to the committed table under each seed it was
calibrated on, bound o's tolerance by a small multiple of the correct control's error, and check that a
low-precision bug the old tolerance let through now fails.
"""

from __future__ import annotations

import json

import pytest
import torch
from bugs_kda import LOW_PRECISION_BUGS
from cake.experiments.kda.controls import kda_forward_chunked, preactivate32
from cake.verifier import calibrate, get_contract, run_battery
from cake.verifier.battery import make_context
from cake.verifier.expected import to_reference_inputs
from cake.verifier.gates import get_gate
from cake.verifier.inputs import materialize
from cake.verifier.registry import get_controls
from cake.verifier.tolerance import eps, load_table
from cake.verifier.tolerance_band import SANE_MAX_RATIO, entry_findings
from torch import Tensor

OP = "kda_forward"
CALIBRATED_SEEDS = (0, 1, 2, 3)
LOW = (torch.bfloat16, torch.float16)
# Seeds 1 and 3 are those under which correct controls failed the seed-0 table (1.72x and 1.43x its coefficient).
SEED_PARAMS = [pytest.param(s, marks=pytest.mark.slow) if s in (0, 2) else s for s in CALIBRATED_SEEDS]


def _entry(op: str, dtype: torch.dtype) -> dict[str, object]:
    table = get_contract(op).tolerance.table
    assert table is not None
    return json.loads(table.read_text())["ops"][op][str(dtype).removeprefix("torch.")]  # type: ignore[no-any-return]


def test_the_table_was_calibrated_over_every_seed_and_is_in_the_band() -> None:
    table = get_contract(OP).tolerance.table
    assert table is not None
    assert f"seeds {', '.join(map(str, CALIBRATED_SEEDS))}" in json.loads(table.read_text())["method"]
    for dtype in get_contract(OP).dtypes:
        entry = _entry(OP, dtype)
        assert entry_findings(OP, str(dtype).removeprefix("torch."), entry, argmin=False) == []
        assert float(entry["coefficient"]) <= 10.0  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", SEED_PARAMS)
@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_every_correct_control_passes_under_every_calibrated_seed(seed: int, dtype: torch.dtype) -> None:
    contract = get_contract(OP)
    coefficient = load_table(contract.tolerance.table).coefficient(OP, dtype)
    for name, control in get_controls(OP).named().items():
        found = calibrate.ratios(contract, control, dtype, False, "cpu", name, seed)
        worst = max(found, key=lambda r: r.ratio)
        assert worst.ratio <= min(coefficient, SANE_MAX_RATIO[1]), worst.describe(OP)


def _o_error_and_tolerance(dtype: torch.dtype) -> list[tuple[Tensor, Tensor, Tensor]]:
    """(error, tolerance, |ref|) of o for the correct chunked control on the cases of CMP-01 and CMP-03 (shape tails) at `dtype`."""
    contract = get_contract(OP)
    ctx = make_context(contract, kda_forward_chunked, dtypes=[dtype])
    found = []
    for case in (c for gate in ("CMP-01", "CMP-03") for c in get_gate(gate).plan(ctx, dtype)):
        inputs = materialize(contract, case)
        o = kda_forward_chunked(*inputs)[0]
        inputs64 = to_reference_inputs(inputs)
        refs = contract.reference(*inputs64)
        bound = contract.tolerance.bound(OP, dtype, case.dim_map, inputs64, refs,
                                         contract.output_dtypes(list(inputs), dtype))[0]
        found.append(((o.double() - refs[0]).abs(), bound.expand_as(refs[0]), refs[0].abs()))
    return found


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_o_tolerance_is_a_small_multiple_of_the_correct_control_error(dtype: torch.dtype) -> None:
    coefficient = load_table(get_contract(OP).tolerance.table).coefficient(OP, dtype)
    assert coefficient * eps(dtype) <= 0.1  # the |ref| part: under 10% of |ref| (it was 12 |ref| at bf16)
    worst = max(float((err / tol).max()) for err, tol, _ in _o_error_and_tolerance(dtype))
    # A correct control comes within 16x of o's tolerance somewhere (measured: 1/11.6 at bf16 and fp16; the seed-0
    # table allowed ~9000x), and never past it.
    assert 1 / 16 <= worst <= 1.0


@pytest.mark.parametrize("bug", LOW_PRECISION_BUGS, ids=[b.__name__ for b in LOW_PRECISION_BUGS])
@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_low_precision_bug_passes_fp32_and_fails_at_low_precision(bug, dtype: torch.dtype) -> None:  # type: ignore[no-untyped-def]
    def fused(q, k, v, g, beta, a_log, dt_bias, h0, cu):  # type: ignore[no-untyped-def]
        qn, kn, gate, b = preactivate32(q, k, g, beta, a_log, dt_bias)
        return bug(qn.to(q.dtype), kn.to(k.dtype), v, gate, b, h0, cu)

    contract = get_contract(OP)
    assert run_battery(contract, fused, dtypes=[torch.float32], gates=["CMP-01"]).passed, bug.__doc__
    verdict = run_battery(contract, fused, dtypes=[dtype], gates=["CMP-01"])
    assert not verdict.passed, bug.__doc__
