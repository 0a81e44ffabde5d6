"""Explicit shape refusals (cake.errors.ShapeNotSupported): recorded and listed, never judged, never a pass
on their own, and distinct from a kernel that crashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake.experiments.kmeans.controls import kmeans_assign
from cake.verifier.battery import ALL_REFUSED, run_battery, run_gate
from cake.verifier.registry import get_contract
from cake.verifier.results import (
    SHAPE_ONLY_RULE,
    GateResult,
    GateStatus,
    Refusal,
    Verdict,
    enforce_shape_only_refusals,
)
from cake.verifier.verdict_cache import VerdictCache
from cake.verifier.worker import verify_in_worker
from cake.verifier.worker_protocol import KernelRef
from torch import Tensor

from cake.errors import ShapeNotSupported

MAX_D = 512
# The gates whose plans reach the long reduction D=1031 on the CPU, plus CMP-01 (which must judge a case).
GATES = ("CMP-01", "ORD-01", "EXC-02")


def assign_up_to_512(x: Tensor, c: Tensor) -> Tensor:
    """A correct kmeans_assign that, like an on-chip-tile kernel, cannot hold D > 512."""
    if x.shape[-1] > MAX_D:
        raise ShapeNotSupported(f"D={x.shape[-1]} > {MAX_D}: the [BN, D] point tile does not fit on chip")
    return kmeans_assign(x, c)


def refuses_everything(x: Tensor, c: Tensor) -> Tensor:
    raise ShapeNotSupported(f"D={x.shape[-1]}: this kernel runs nothing")


def crashes_on_long_d(x: Tensor, c: Tensor) -> Tensor:
    if x.shape[-1] > MAX_D:
        raise RuntimeError("CUDA error: too many resources requested for launch")
    return kmeans_assign(x, c)


def test_refused_long_reduction_passes_with_the_refusals_listed() -> None:
    verdict = run_battery(get_contract("kmeans_assign"), assign_up_to_512, dtypes=["float32"], gates=GATES,
                          all_gates=True)
    assert verdict.passed, [(g.gate_id, g.status, g.reason) for g in verdict.gates]
    assert verdict.refused, "the D=1031 case must be listed as refused"
    assert all(dict(r.dims)["D"] > MAX_D and "does not fit on chip" in r.reason for r in verdict.refused)
    refusing = [g for g in verdict.gates if g.refused_cases]
    assert refusing and all(g.refusals for g in refusing)
    assert verdict.gate("CMP-01").cases_run > 0 and not verdict.gate("CMP-01").dtypes_refused
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict
    assert json.loads(verdict.to_json())["refused"][0]["dims"]["D"] > MAX_D


def test_a_kernel_that_refuses_everything_is_not_a_pass() -> None:
    verdict = run_battery(get_contract("kmeans_assign"), refuses_everything, dtypes=["float32", "float16"],
                          gates=GATES, all_gates=True)
    assert not verdict.passed
    assert not verdict.failures  # nothing ran, so nothing failed: the CMP-01 rule is what refuses the pass
    for gate in verdict.gates:
        assert gate.status is GateStatus.SKIP and gate.reason.startswith(ALL_REFUSED)
        assert gate.cases_run == 0 and gate.refused_cases > 0
    assert verdict.gate("CMP-01").dtypes_refused == ("float32", "float16")


def test_a_plain_runtime_error_is_still_a_runtime_error() -> None:
    result = run_gate("ORD-01", get_contract("kmeans_assign"), crashes_on_long_d, dtypes=["float32"])
    assert result.status is GateStatus.RUNTIME_ERROR
    assert "RuntimeError" in result.reason and result.refused_cases == 0


def test_refusals_cross_the_worker_and_the_verdict_cache(tmp_path: Path) -> None:
    kernel = tmp_path / "k.py"
    kernel.write_text(
        "from cake.errors import ShapeNotSupported\n"
        "from cake.experiments.kmeans.controls import kmeans_assign\n"
        "def k(x, c):\n"
        f"    if x.shape[-1] > {MAX_D}:\n"
        "        raise ShapeNotSupported(f'D={x.shape[-1]} too long')\n"
        "    return kmeans_assign(x, c)\n")
    cache = VerdictCache(tmp_path / "cache")
    args = dict(device="cpu", dtypes=("float32",), seed=0, all_gates=True, timeout_s=60.0, gates=GATES, cache=cache)
    first = verify_in_worker("kmeans_assign", KernelRef.parse(f"{kernel}:k"), **args)  # type: ignore[arg-type]
    assert first.passed and first.refused and "too long" in first.refused[0].reason
    cached = verify_in_worker("kmeans_assign", KernelRef.parse(f"{kernel}:k"), **args)  # type: ignore[arg-type]
    assert cached == first and len(list((tmp_path / "cache").rglob("*.json"))) == 1


@pytest.mark.parametrize("dims", [(("D", 1031), ("K", 3)), ()])
def test_refusal_json_round_trip(dims: tuple[tuple[str, int], ...]) -> None:
    refusal = Refusal(tuple(sorted(dims)), "float32", "too big", ("ORD-01", "EXC-02"))
    assert Refusal.from_json(json.loads(json.dumps(refusal.to_json()))) == refusal



# --- a refusal must depend only on the shape -------------------------------------------------------------

def refuses_nan_inputs(x: Tensor, c: Tensor) -> Tensor:
    """Dishonest: refuses by VALUE (any NaN), at shapes it runs happily otherwise."""
    if bool(x.isnan().any()) or bool(c.isnan().any()):
        raise ShapeNotSupported("shape not supported")
    return kmeans_assign(x, c)


def _assert_value_refusal_caught(verdict: Verdict) -> None:
    assert not verdict.passed
    exc = verdict.gate("EXC-01")
    assert exc.status is GateStatus.FAIL, (exc.status, exc.reason)
    assert exc.reason.startswith("refused shape [") and SHAPE_ONLY_RULE in exc.reason
    assert "dtype float32 that gate " in exc.reason
    assert exc.evidence is not None and exc.evidence.tensor == "shape" and exc.evidence.note.endswith("float32")
    assert exc.dtypes_failed == ("float32",)
    assert verdict.gate("CMP-01").status is GateStatus.PASS  # the gate that ran the shape is not blamed


def test_a_kernel_that_refuses_nan_inputs_at_a_judged_shape_fails() -> None:
    verdict = run_battery(get_contract("kmeans_assign"), refuses_nan_inputs, dtypes=["float32"],
                          gates=("CMP-01", "EXC-01"), all_gates=True)
    _assert_value_refusal_caught(verdict)
    assert Verdict.from_json(verdict.to_json()) == verdict


def test_a_value_refusal_is_caught_through_the_worker(tmp_path: Path) -> None:
    kernel = tmp_path / "k.py"
    kernel.write_text(
        "from cake.errors import ShapeNotSupported\n"
        "from cake.experiments.kmeans.controls import kmeans_assign\n"
        "def k(x, c):\n"
        "    if bool(x.isnan().any()) or bool(c.isnan().any()):\n"
        "        raise ShapeNotSupported('shape not supported')\n"
        "    return kmeans_assign(x, c)\n")
    verdict = verify_in_worker("kmeans_assign", KernelRef.parse(f"{kernel}:k"), device="cpu", dtypes=("float32",),
                               seed=0, all_gates=True, timeout_s=60.0, gates=("CMP-01", "EXC-01"),
                               cache=VerdictCache(tmp_path / "cache"))
    _assert_value_refusal_caught(verdict)


def test_honest_shape_refusals_record_judged_shapes_and_no_clash() -> None:
    verdict = run_battery(get_contract("kmeans_assign"), assign_up_to_512, dtypes=["float32"],
                          gates=GATES + ("EXC-01",), all_gates=True)
    assert verdict.passed, [(g.gate_id, g.status, g.reason) for g in verdict.gates]
    judged = {s for g in verdict.gates for s in g.judged}
    assert judged and all(dict(dims)["D"] <= MAX_D and dtype == "float32" for dims, dtype in judged)
    assert verdict.gate("CMP-01").cases_run >= len(verdict.gate("CMP-01").judged) > 0


def _shape_gate(gate_id: str, *, ran: bool, refused: bool, status: GateStatus = GateStatus.PASS) -> GateResult:
    shape = ((("D", 8), ("N", 4)), "float16")
    return GateResult(gate_id, status, "x", judged=(shape,) if ran else (),
                      refusals=(Refusal(shape[0], shape[1], "no", (gate_id,)),) if refused else (),
                      refused_cases=int(refused))


def test_the_refusing_gate_fails_whatever_the_order_and_a_failed_gate_keeps_its_result() -> None:
    early_refusal = enforce_shape_only_refusals((_shape_gate("CMP-01", ran=False, refused=True),
                                                 _shape_gate("EXC-01", ran=True, refused=False)))
    assert [g.status for g in early_refusal] == [GateStatus.FAIL, GateStatus.PASS]
    assert "refused shape [D=8,N=4] dtype float16 that gate EXC-01 ran" in early_refusal[0].reason
    same_gate = enforce_shape_only_refusals((_shape_gate("EXC-01", ran=True, refused=True),))
    assert same_gate[0].status is GateStatus.FAIL and "that gate EXC-01 ran" in same_gate[0].reason
    already = _shape_gate("EXC-01", ran=False, refused=True, status=GateStatus.RUNTIME_ERROR)
    kept = enforce_shape_only_refusals((_shape_gate("CMP-01", ran=True, refused=False), already))
    assert kept[1] == already
    verdict = Verdict.of("kmeans_assign", (_shape_gate("CMP-01", ran=True, refused=False), already))
    assert not verdict.passed
    other_dtype = GateResult("CMP-01", GateStatus.PASS, "x", judged=(((("D", 8), ("N", 4)), "float32"),))
    assert Verdict.of("k", (other_dtype, _shape_gate("EXC-01", ran=False, refused=True))).passed
    assert GateResult.from_json(json.loads(json.dumps(other_dtype.to_json()))) == other_dtype
