"""Explicit shape refusals (cake.errors.ShapeNotSupported): recorded and listed, never judged, never a pass
on their own, and distinct from a kernel that crashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake.verifier.battery import ALL_REFUSED, run_battery, run_gate
from cake.verifier.contracts import get_contract
from cake.verifier.kernels_reference import TORCH_CONTROLS
from cake.verifier.results import GateStatus, Verdict
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
    return TORCH_CONTROLS["kmeans_assign"](x, c)


def refuses_everything(x: Tensor, c: Tensor) -> Tensor:
    raise ShapeNotSupported(f"D={x.shape[-1]}: this kernel runs nothing")


def crashes_on_long_d(x: Tensor, c: Tensor) -> Tensor:
    if x.shape[-1] > MAX_D:
        raise RuntimeError("CUDA error: too many resources requested for launch")
    return TORCH_CONTROLS["kmeans_assign"](x, c)


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
        "from cake.verifier.kernels_reference import TORCH_CONTROLS\n"
        "def k(x, c):\n"
        f"    if x.shape[-1] > {MAX_D}:\n"
        "        raise ShapeNotSupported(f'D={x.shape[-1]} too long')\n"
        "    return TORCH_CONTROLS['kmeans_assign'](x, c)\n")
    cache = VerdictCache(tmp_path / "cache")
    args = dict(device="cpu", dtypes=("float32",), seed=0, all_gates=True, timeout_s=60.0, gates=GATES, cache=cache)
    first = verify_in_worker("kmeans_assign", KernelRef.parse(f"{kernel}:k"), **args)  # type: ignore[arg-type]
    assert first.passed and first.refused and "too long" in first.refused[0].reason
    cached = verify_in_worker("kmeans_assign", KernelRef.parse(f"{kernel}:k"), **args)  # type: ignore[arg-type]
    assert cached == first and len(list((tmp_path / "cache").rglob("*.json"))) == 1


@pytest.mark.parametrize("dims", [(("D", 1031), ("K", 3)), ()])
def test_refusal_json_round_trip(dims: tuple[tuple[str, int], ...]) -> None:
    from cake.verifier.results import Refusal

    refusal = Refusal(tuple(sorted(dims)), "float32", "too big", ("ORD-01", "EXC-02"))
    assert Refusal.from_json(json.loads(json.dumps(refusal.to_json()))) == refusal

