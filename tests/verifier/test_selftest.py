"""`cake verify --self-test` machinery: mutation operators over correct controls, killed by the gates that
should kill them, every survivor accounted for. A fast subset (fp32, small shapes); the full table is a CLI
run (experiments/RESULTS.md)."""

from __future__ import annotations

import pytest
import torch
from cake.verifier.mutants import OPERATORS, MutationClass, mutants_of
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.selftest import format_report, run_self_test


def TORCH(op: str):  # noqa: N802 - reads like the constant it replaces
    return get_controls(op).torch


SUBSET = ("TAIL-DROP", "STRIDE-IGNORE", "CACHE-BUFFER", "INPUT-WRITTEN", "NAN-GUARD-REMOVED", "MASK-RED-LONG",
          "ACC-INPUT-DTYPE", "SIDE-STREAM")


def test_every_class_of_the_issue_has_an_operator() -> None:
    assert {op.cls for op in OPERATORS.values()} == set(MutationClass)
    assert all(op.op_id == key and op.title for key, op in OPERATORS.items())


def test_interior_operators_apply_only_where_the_control_makes_the_call() -> None:
    made = {op.op_id: mutant for op, mutant, _ in mutants_of(get_contract("softmax"), get_controls("softmax").sequential,
                                                              device="cpu")}
    assert made["NO-MAX-SUB"] is not None  # the sequential softmax subtracts the row max itself
    torch_made = {op.op_id: (mutant, why) for op, mutant, why in
                  mutants_of(get_contract("softmax"), TORCH("softmax"), device="cpu")}
    assert torch_made["NO-MAX-SUB"][0] is None and "no call" in torch_made["NO-MAX-SUB"][1]
    assert torch_made["SIDE-STREAM"][0] is None and "GPU only" in torch_made["SIDE-STREAM"][1]
    rms = {op.op_id: m for op, m, _ in mutants_of(get_contract("rmsnorm"), TORCH("rmsnorm"), device="cpu")}
    x, w = torch.randn(4, 8) * 1e-4, torch.ones(8)
    x[0] = 0.0
    assert torch.isnan(rms["NO-EPS"](x, w)[0]).all() and not torch.isnan(TORCH("rmsnorm")(x, w)).any()


@pytest.mark.parametrize("op", ["row_sum", "kmeans_assign"])
def test_self_test_kills_or_accounts_for_every_mutant(op: str) -> None:
    report = run_self_test([op], dtypes=["float32"], sources=["torch"], operators=SUBSET)
    assert not report.control_failures
    by_op = {o.operator: o for o in report.outcomes}
    assert not by_op["SIDE-STREAM"].applicable and "GPU only" in by_op["SIDE-STREAM"].note
    assert by_op["TAIL-DROP"].killed and "POISON" in by_op["TAIL-DROP"].killed_by
    assert by_op["STRIDE-IGNORE"].killed_by == ("CMP-03",)  # only the strided layouts can see it
    assert "ALIAS" in by_op["CACHE-BUFFER"].killed_by
    assert "MUTATE" in by_op["INPUT-WRITTEN"].killed_by
    # Equivalent in fp32 (and MASK-RED-LONG reads a 0 that a sum or a distance ignores): argued, not gaps.
    assert by_op["ACC-INPUT-DTYPE"].survived and "fp32" in by_op["ACC-INPUT-DTYPE"].note
    assert by_op["MASK-RED-LONG"].survived and by_op["MASK-RED-LONG"].note
    assert report.unaccounted == []
    if op == "kmeans_assign":  # its control guards NaN distances with nan_to_num; without it EXC-01 fails
        assert by_op["NAN-GUARD-REMOVED"].killed_by == ("EXC-01",)
    text = format_report(report)
    assert "| CMP-03 |" in text and "| swapped or ignored strides |" in text and "survivors:" in text


def test_an_unargued_survivor_is_reported_as_a_gap() -> None:
    report = run_self_test(["softmax"], dtypes=["float16"], sources=["torch"], operators=["ACC-INPUT-DTYPE"],
                           gates=["CMP-01"])
    assert [o.operator for o in report.survivors] == ["ACC-INPUT-DTYPE"] and report.unaccounted == []
    report = run_self_test(["softmax"], dtypes=["float16"], sources=["torch"], operators=["INPUT-WRITTEN"],
                           gates=["CMP-01"])  # MUTATE not run: the in-place write survives, unargued
    assert [o.operator for o in report.unaccounted] == ["INPUT-WRITTEN"]
    assert "UNACCOUNTED" in format_report(report)
