"""Tolerance model sanity: derived from dtype, reduction length and scale; calibrated data loads."""

from __future__ import annotations

import math

import torch
from cake.verifier.compare import to_reference_inputs
from cake.verifier.inputs import Layout, ValueFamily, make_case, materialize
from cake.verifier.registry import CONTRACTS
from cake.verifier.tolerance import DEFAULT_COEFFICIENT, dtype_name, load_table


def _bound(op: str, dtype: torch.dtype, **dims: int) -> torch.Tensor:
    contract = CONTRACTS[op]
    case = make_case({**contract.default_dims("cpu"), **dims}, dtype, ValueFamily.RANDN, Layout.CONTIGUOUS, 0, "t", 0)
    inputs64 = to_reference_inputs(materialize(contract, case))
    refs = contract.reference(*inputs64)
    out = contract.output_dtypes(list(materialize(contract, case)), dtype)
    return contract.tolerance.bound(op, dtype, case.dim_map, inputs64, refs, out)[0]


def test_lower_precision_gets_looser_tolerance() -> None:
    f32, f16, bf16 = (_bound("row_sum", d).mean().item() for d in (torch.float32, torch.float16, torch.bfloat16))
    assert f32 < f16 < bf16


def test_tolerance_grows_like_a_sequential_fp32_sum() -> None:
    # eps * sqrt(N) * (|t|_2 + |r|): for randn products |t|_2 and |r| both grow like sqrt(N), so the bound
    # grows like N, as the error of one fp32 accumulator fed N terms in order does.
    short = _bound("matmul", torch.float32, K=16).mean().item()
    long = _bound("matmul", torch.float32, K=1024).mean().item()
    ratio = 1024 / 16
    assert math.sqrt(ratio) < long / short < 2 * ratio


def test_each_builtin_op_has_a_committed_table_covering_its_dtypes() -> None:
    for name in ("softmax", "rmsnorm", "row_sum", "matmul", "kmeans_assign", "kmeans_update"):
        contract = CONTRACTS[name]
        assert contract.tolerance.table is not None and contract.tolerance.table.is_file(), name
        table = load_table(contract.tolerance.table)
        for dtype in contract.dtypes:
            assert dtype_name(dtype) in table.coefficients[name] and table.coefficient(name, dtype) >= 1.0
    assert load_table(None).coefficient("no_such_op", torch.float32) == DEFAULT_COEFFICIENT
