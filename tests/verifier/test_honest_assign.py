"""Issue 16 item 3 on the kmeans assign contract: the persistent-grid GPU case (judged on sampled rows),
ORD-01 and PRC-02 judging kernels that hold the point tile on chip, and a planted fp16 accumulator."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from cake.verifier.battery import make_context, run_gate
from cake.verifier.expected import expected_for_case
from cake.verifier.gates import DimsProfile, GateStatus, get_gate
from cake.verifier.gates.base import check_against_reference
from cake.verifier.inputs import Layout, ValueFamily, make_case
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.sampling import SAMPLE_BLOCK, sample_rows

from cake.arch import DEVICES
from cake.errors import ShapeNotSupported

ASSIGN = get_contract("kmeans_assign")
CONTROL = get_controls("kmeans_assign").torch


def fp16_accumulator_assign(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Planted bug: x.c accumulated in the input dtype, 16 terms per step (an mma k-step) — the distances are
    right to fp16's precision only, so nearby centroids swap."""
    xf, cf = x.float(), c.float()
    acc = torch.zeros(x.shape[0], x.shape[1], c.shape[1], dtype=x.dtype)
    for k0 in range(0, x.shape[-1], 16):
        acc = (acc.float() + xf[..., k0:k0 + 16] @ cf[..., k0:k0 + 16].transpose(1, 2)).to(x.dtype)
    dist = (cf * cf).sum(-1)[:, None, :] - 2.0 * acc.float()
    return dist.nan_to_num(nan=float("inf")).argmin(-1)


def on_chip(kernel):
    """What a kernel holding the point tile in shared memory does: refuse D > 128 (ShapeNotSupported)."""
    def call(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] > 128:
            raise ShapeNotSupported(f"D={x.shape[-1]} does not fit shared memory")
        return kernel(x, c)
    return call


def test_persistent_grid_case_is_in_the_gpu_shapes() -> None:
    sms = DEVICES["H200"].sm_count
    persistent = [dict(d) for d in ASSIGN.gpu_cases
                  if d and dict(d)["B"] * math.ceil(dict(d)["N"] / 128) > 2 * sms and dict(d)["N"] % 128]
    assert persistent, "no GPU case gives a persistent grid at BN=128 more than 2 tiles per CTA with a tail"
    gpu = make_context(ASSIGN, CONTROL, dims_profile=DimsProfile.GPU)
    planned = get_gate("CMP-01").plan(gpu, torch.float16)
    big = [c for c in planned if c.dim_map == persistent[0]]
    assert len(big) == 1 and big[0].sampled and big[0].case_index == len(planned) - 1
    small = get_gate("CMP-01").plan(make_context(ASSIGN, CONTROL), torch.float16)
    assert not any(c.sampled for c in small)  # the interpreter never runs it
    # the GPU case comes last: every other case keeps its index (and its replay token) on both profiles
    assert [(c.family, c.case_index) for c in small] == [(c.family, c.case_index) for c in planned[: len(small)]]


def test_sample_rows_hits_every_block_and_both_ends() -> None:
    case = make_case({"B": 1, "N": 1000, "K": 3, "D": 4}, torch.float32, ValueFamily.RANDN, Layout.CONTIGUOUS,
                     5, "CMP-01", 9)
    rows = sample_rows(case, 1000)
    assert rows[0] == 0 and rows[-1] == 999 and bool((rows[1:] > rows[:-1]).all())
    blocks = set((rows // SAMPLE_BLOCK).tolist())
    assert blocks == set(range(math.ceil(1000 / SAMPLE_BLOCK)))
    assert len(rows) <= 1000 // SAMPLE_BLOCK + 3


def _sampled_case(n: int = 1001):
    dims = {"B": 2, "N": n, "K": 17, "D": 16}
    return replace(make_case(dims, torch.float32, ValueFamily.RANDN, Layout.CONTIGUOUS, 0, "CMP-01", 99), sampled=True)


def test_sampled_case_computes_the_reference_on_sampled_rows_only() -> None:
    case = _sampled_case()
    expected = expected_for_case(ASSIGN, case, "cpu")
    assert expected.rows is not None
    assert expected.refs[0].shape == (2, len(expected.rows))
    ctx = make_context(ASSIGN, CONTROL)
    assert check_against_reference(ctx, case).status is GateStatus.PASS


@pytest.mark.parametrize("bug", ["dropped_tail_tile", "skipped_refill", "short_output"])
def test_sampled_case_catches_a_dropped_tile(bug: str) -> None:
    def kernel(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        ids = CONTROL(x, c)
        n = ids.shape[1]
        if bug == "dropped_tail_tile":
            ids[:, n - n % 128:] = -1  # the partial last tile is never written
        elif bug == "skipped_refill":
            ids[:, 384:512] = -1  # a persistent CTA's second tile
        else:
            ids = ids[:, :-1]
        return ids

    outcome = check_against_reference(make_context(ASSIGN, kernel), _sampled_case())
    assert outcome.status is GateStatus.FAIL, outcome.reason


@pytest.mark.parametrize("gate_id", ["ORD-01", "PRC-02"])
def test_ord01_prc02_judge_an_on_chip_assign(gate_id: str) -> None:
    for kernel in (CONTROL, on_chip(CONTROL)):
        result = run_gate(gate_id, ASSIGN, kernel, dtypes=["float16"])
        assert result.status is GateStatus.PASS, result.reason
    on_chip_result = run_gate(gate_id, ASSIGN, on_chip(CONTROL), dtypes=["float16"])
    assert on_chip_result.refused_cases > 0 and on_chip_result.cases_run > 0
    assert any("D=128" in " ".join(f"{k}={v}" for k, v in shape[0]) for shape in on_chip_result.judged)


@pytest.mark.parametrize("wrap", [False, True], ids=["any_d", "on_chip"])
def test_planted_fp16_accumulator_fails_prc02(wrap: bool) -> None:
    kernel = on_chip(fp16_accumulator_assign) if wrap else fp16_accumulator_assign
    result = run_gate("PRC-02", ASSIGN, kernel, dtypes=["float16"])
    assert result.status is GateStatus.FAIL
    assert "positive" in result.reason and "distance gap" in result.reason


def test_gate_notes_say_what_they_check_for_argmin() -> None:
    assert any("argmin" in note for note in get_gate("ORD-01").notes)
    assert any("argmin" in note for note in get_gate("PRC-02").notes)
