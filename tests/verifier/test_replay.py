"""Replay tokens regenerate byte-identical inputs; the minimizer shrinks failures; inputs are seeded."""

from __future__ import annotations

import pytest
import torch
from cake.verifier import GateStatus, get_contract, run_battery, run_gate
from cake.verifier.battery import make_context
from cake.verifier.inputs import Layout, ValueFamily, make_case, materialize
from cake.verifier.registry import CONTRACTS
from cake.verifier.replay import ReplayToken, case_for, inputs_hash, minimize, replay
from cake.verifier.replay_hash import inputs_hash as hash_again
from cake.verifier.tokens import BadTokenError
from torch import Tensor


def drops_tail(x: Tensor) -> Tensor:
    return x[:, : max(1, (x.shape[1] // 16) * 16)].float().sum(-1).to(x.dtype)


def off_by_one_rows(a: Tensor, b: Tensor) -> Tensor:
    c = (a.float() @ b.float()).to(a.dtype)
    if a.shape[0] % 2:
        c[-1] = 0
    return c


@pytest.mark.parametrize(("op", "kernel"), [("row_sum", drops_tail), ("matmul", off_by_one_rows)])
def test_every_failure_replays_with_the_same_bytes_and_evidence(op: str, kernel) -> None:
    verdict = run_battery(get_contract(op), kernel, all_gates=True)
    failures = verdict.failures
    assert failures
    for failure in failures:
        assert failure.replay_token and failure.evidence
        replayed = replay(failure.replay_token, kernel)
        assert replayed.inputs_hash == failure.evidence.inputs_hash
        assert replayed.status is failure.status and replayed.reason == failure.reason


def test_token_round_trips_and_rejects_garbage() -> None:
    token = ReplayToken("matmul", "CMP-03", 7, 4, "float16", "cuda", (("K", 3), ("M", 1)))
    assert ReplayToken.decode(token.encode()) == token
    assert token.encode() == "cake1:matmul:CMP-03:7:4:float16:cuda:K=3,M=1"
    with pytest.raises(BadTokenError):
        ReplayToken.decode("cake0:matmul:CMP-01")


def test_inputs_are_deterministic_across_devices_and_layouts_differ_in_hash() -> None:
    contract = CONTRACTS["kmeans_update"]
    case = make_case(contract.default_dims("cpu"), torch.float16, ValueFamily.STRUCTURED, Layout.STRIDED, 3, "CMP-01", 5)
    a, b = materialize(contract, case), materialize(contract, case)
    assert inputs_hash(a) == hash_again(b)
    assert not a[0].is_contiguous()  # strided view kept
    contiguous = materialize(contract, make_case(case.dim_map, torch.float16, ValueFamily.STRUCTURED,
                                                 Layout.CONTIGUOUS, 3, "CMP-01", 5))
    assert all(torch.equal(x, y) for x, y in zip(a, contiguous, strict=True))  # same values ...
    assert inputs_hash(a) != inputs_hash(contiguous)  # ... but a different case
    other = make_case(case.dim_map, torch.float16, ValueFamily.STRUCTURED, Layout.STRIDED, 4, "CMP-01", 5)
    assert inputs_hash(materialize(contract, other)) != inputs_hash(a)


def test_structured_kmeans_inputs_have_empty_clusters() -> None:
    contract = CONTRACTS["kmeans_update"]
    case = make_case(contract.default_dims("cpu"), torch.float32, ValueFamily.STRUCTURED, Layout.CONTIGUOUS, 0, "g", 0)
    _, ids, c_old = materialize(contract, case)
    assert ids is not None and c_old is not None
    assert set(ids.unique().tolist()) <= set(range(0, c_old.shape[1], 2))


def test_minimize_shrinks_to_a_still_failing_smaller_case() -> None:
    contract = get_contract("row_sum")
    failure = run_gate("CMP-01", contract, drops_tail)
    ctx = make_context(contract, drops_tail, dtypes=["float32"])
    case = case_for(failure.replay_token or "", ctx)
    small = minimize(contract, drops_tail, case)
    assert small.dim_map["M"] == 1 and small.dim_map["N"] < case.dim_map["N"]
    assert small.dim_map["N"] % 16 != 0  # the smallest failing width is not a multiple of the tile
    token = ReplayToken("row_sum", small.gate_id, small.seed, small.case_index, "float32", "cpu", small.dims)
    assert replay(token, drops_tail).status is GateStatus.FAIL
