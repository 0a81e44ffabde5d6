"""KDA's contracts: value domains and varlen structure the gates feed, the fp64 reference's meaning, the
correct controls passing, and every planted bug passing the standard check while failing the gates (with a
byte-identical replay)."""

from __future__ import annotations

import pytest
import torch
from bugs_kda import BUGS
from cake.experiments.kda import reference as ref
from cake.experiments.kda.controls import kda_core_chunked, kda_core_recurrent, kda_forward_chunked
from cake.verifier import GateStatus, get_contract, run_battery
from cake.verifier.battery import make_context
from cake.verifier.gates import get_gate
from cake.verifier.inputs import host_values, materialize
from cake.verifier.replay import case_for, replay
from cake.verifier.replay_hash import inputs_hash
from cake.verifier.standard import standard_check

GATES_WITH_ODD_VALUES = ("CMP-01", "CMP-03", "EXC-01", "EXC-02", "ORD-01", "ORD-03", "PRC-01")


def planned_cases(op: str, dtype: torch.dtype = torch.float32):  # type: ignore[no-untyped-def]
    ctx = make_context(get_contract(op), lambda *a: None, dtypes=[dtype])
    for gate_id in GATES_WITH_ODD_VALUES:
        yield from get_gate(gate_id).plan(ctx, dtype)


@pytest.mark.parametrize("op", ["kda_core", "kda_forward"])
def test_gates_feed_only_values_inside_the_domains(op: str) -> None:
    contract = get_contract(op)
    names = [s.name for s in contract.inputs]
    seen_omitted = set()
    for case in planned_cases(op):
        values = dict(zip(names, host_values(contract, case), strict=True))
        seen_omitted.add(case.omitted)
        dims = contract.resolve_dims(case.dim_map, case.omitted)
        for name, value in values.items():
            if value is not None and value.is_floating_point():
                assert bool(torch.isfinite(value).all()), (case.describe(), name)
        if op == "kda_core":
            assert float(values["g"].min()) >= ref.LOWER_BOUND and float(values["g"].max()) <= 0.0
            assert float(values["beta"].min()) >= 0.0 and float(values["beta"].max()) <= 1.0
            for name in ("q", "k"):
                norms = values[name].double().norm(dim=-1)
                assert torch.allclose(norms, torch.ones_like(norms), atol=1e-6), (case.describe(), name)
        cu = values["cu_seqlens"]
        if cu is None:
            assert dims["N"] == dims["B"]
        else:
            assert dims["B"] == 1 and cu.shape == (dims["N"] + 1,) and cu.dtype == torch.int64
            assert int(cu[0]) == 0 and int(cu[-1]) == dims["T"] and bool((cu[1:] >= cu[:-1]).all())
        state = values["initial_state"]
        assert state is None or state.shape == (dims["N"], dims["H"], dims["K"], dims["V"])
    # every combination of the two optional inputs is exercised
    assert seen_omitted == {(), ("initial_state",), ("cu_seqlens",), ("initial_state", "cu_seqlens")}


def test_adversarial_varlen_cases_hold_empty_sequences() -> None:
    contract = get_contract("kda_core")
    empties = 0
    for case in planned_cases("kda_core"):
        cu = host_values(contract, case)[6]
        if cu is not None:
            empties += int((cu[1:] == cu[:-1]).sum())
    assert empties > 0


def test_reference_one_token_closed_form() -> None:
    gen = torch.Generator().manual_seed(1)
    q, k = (ref.l2norm(torch.randn(1, 1, 2, 4, generator=gen, dtype=torch.float64)) for _ in range(2))
    v = torch.randn(1, 1, 2, 3, generator=gen, dtype=torch.float64)
    g = -torch.rand(1, 1, 2, 4, generator=gen, dtype=torch.float64)
    beta = torch.rand(1, 1, 2, generator=gen, dtype=torch.float64)
    h0 = torch.randn(1, 2, 4, 3, generator=gen, dtype=torch.float64)
    o, state = ref.kda_core(q, k, v, g, beta, h0, None)
    decayed = h0[0] * g[0, 0].exp()[:, :, None]
    kk = k[0, 0]
    want_state = decayed + beta[0, 0][:, None, None] * kk[:, :, None] * (v[0, 0] - torch.einsum("hk,hkv->hv", kk, decayed))[:, None]
    assert torch.allclose(state[0], want_state)
    assert torch.allclose(o[0, 0], 0.5 * torch.einsum("hk,hkv->hv", q[0, 0], want_state))  # scale = K^-1/2 = 1/2


def test_reference_varlen_is_independent_sequences_and_empty_ones_keep_their_state() -> None:
    gen = torch.Generator().manual_seed(2)
    t, h, dk, dv = 9, 2, 4, 3
    q, k = (ref.l2norm(torch.randn(1, t, h, dk, generator=gen, dtype=torch.float64)) for _ in range(2))
    v = torch.randn(1, t, h, dv, generator=gen, dtype=torch.float64)
    g = -torch.rand(1, t, h, dk, generator=gen, dtype=torch.float64)
    beta = torch.rand(1, t, h, generator=gen, dtype=torch.float64)
    h0 = torch.randn(4, h, dk, dv, generator=gen, dtype=torch.float64)
    cu = torch.tensor([0, 4, 4, 9, 9])
    o, state = ref.kda_core(q, k, v, g, beta, h0, cu)
    for n, (bos, eos) in enumerate(((0, 4), (4, 4), (4, 9), (9, 9))):
        sl = slice(bos, eos)
        o_n, s_n = ref.kda_core(q[:, sl], k[:, sl], v[:, sl], g[:, sl], beta[:, sl], h0[n : n + 1], None)
        assert torch.equal(o[:, sl], o_n) and torch.equal(state[n], s_n[0])
    assert torch.equal(state[1], h0[1]) and torch.equal(state[3], h0[3])


def test_chunked_control_matches_the_recurrence_in_fp64_terms() -> None:
    contract = get_contract("kda_core")
    case = next(c for c in planned_cases("kda_core") if c.omitted == () and c.dim_map["T"] > 20)
    inputs = materialize(contract, case)
    for a, b in zip(kda_core_chunked(*inputs), kda_core_recurrent(*inputs), strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_chunked_control_passes_every_gate_in_fp32() -> None:
    verdict = run_battery(get_contract("kda_core"), kda_core_chunked, dtypes=[torch.float32], all_gates=True)
    assert verdict.passed, verdict.failures
    skipped = {g.gate_id for g in verdict.gates if g.status is GateStatus.SKIP}
    assert skipped == {"RES-02", "STREAM", "CMP-02", "PRC-02"}  # no report, no GPU, no backward, no fp16


def test_fused_control_passes_value_gates_in_every_dtype() -> None:
    verdict = run_battery(get_contract("kda_forward"), kda_forward_chunked, gates=["CMP-01", "PRC-01"],
                          dtypes=[torch.float32, torch.float16, torch.bfloat16])
    assert verdict.passed, verdict.failures
    assert verdict.gate("PRC-01").dtypes_run == ("float32", "float16", "bfloat16")


@pytest.mark.parametrize("bug", BUGS, ids=[b.__name__ for b in BUGS])
def test_planted_bug_passes_the_standard_check_and_fails_the_gates_with_a_replayable_token(bug) -> None:  # type: ignore[no-untyped-def]
    contract = get_contract("kda_core")
    assert standard_check(contract, bug).passed, bug.__doc__
    verdict = run_battery(contract, bug, dtypes=[torch.float32])
    assert not verdict.passed, bug.__doc__
    failure = verdict.failures[0]
    assert failure.replay_token is not None
    ctx = make_context(contract, bug, dtypes=[torch.float32])
    want = inputs_hash(materialize(contract, case_for(failure.replay_token, ctx), "cpu"))
    again = replay(failure.replay_token, bug)
    assert again.status.is_failure and again.inputs_hash == want
