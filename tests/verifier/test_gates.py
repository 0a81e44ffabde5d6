"""Gates on correct controls pass; hand-planted bugs fail the gate that names their bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from cake.verifier import GATE_ORDER, GateStatus, Verdict, get_contract, run_battery, run_gate
from cake.verifier.gates import GATES, implausible_speed
from cake.verifier.registry import CONTRACTS, UnknownOpError, get_controls
from cake.verifier.standard import standard_check
from torch import Tensor


@pytest.mark.parametrize("op", sorted(CONTRACTS))
def test_torch_control_passes_every_gate(op: str) -> None:
    verdict = run_battery(get_contract(op), get_controls(op).torch, all_gates=True)
    assert verdict.passed, [g for g in verdict.gates if g.status is not GateStatus.PASS]
    assert {g.gate_id for g in verdict.gates} == set(GATE_ORDER)
    skipped = {g.gate_id for g in verdict.gates if g.status is GateStatus.SKIP}
    assert skipped == {"RES-02", "STREAM", "CMP-02"}  # no report, no GPU, no backward


def test_triton_controls_pass_under_the_interpreter_and_skip_bf16() -> None:
    # A fresh process: TRITON_INTERPRET must be set before Triton defines any kernel.
    script = (
        "import json; from cake.verifier import run_battery, get_contract\n"
        "from cake.verifier.registry import CONTRACTS, get_controls\n"
        "gates = ['CMP-01', 'POISON', 'EXC-01', 'PRC-01']\n"
        "out = {op: json.loads(run_battery(get_contract(op), k, interpreter=True, all_gates=True, gates=gates).to_json())\n"
        "       for op in CONTRACTS if (k := get_controls(op).triton_kernel()) is not None}\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for op, data in json.loads(proc.stdout.splitlines()[-1]).items():
        verdict = Verdict.from_json(json.dumps(data))
        assert verdict.passed, (op, verdict.failures)
        prc = verdict.gate("PRC-01")
        assert prc.status is GateStatus.SKIP and "bfloat16 skipped" in prc.reason and "interpreter" in prc.reason


# ---- planted bugs: each passes or may pass the standard check, and fails a named gate ---------------------

def softmax_no_max_subtraction(x: Tensor) -> Tensor:
    e = torch.exp(x.float())
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def row_sum_drops_tail(x: Tensor) -> Tensor:
    return x[:, : (x.shape[1] // 16) * 16 or 1].float().sum(-1).to(x.dtype)


def row_sum_fp16_accumulator(x: Tensor) -> Tensor:
    acc = torch.zeros(x.shape[0], dtype=x.dtype)
    for j in range(x.shape[1]):
        acc = acc + x[:, j]  # accumulates in the input dtype
    return acc


def rmsnorm_mutates_input(x: Tensor, w: Tensor) -> Tensor:
    xf = x.float()
    y = (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
    x.mul_(1.0)  # harmless-looking in-place op on the caller's tensor
    x[..., 0] = y[..., 0]
    return y


_cache: dict[tuple[int, ...], Tensor] = {}


def matmul_caches_by_shape(a: Tensor, b: Tensor) -> Tensor:
    key = (*a.shape, *b.shape)
    if key not in _cache:
        _cache[key] = (a.float() @ b.float()).to(a.dtype)
    return _cache[key]


def matmul_leaves_tail_unwritten(a: Tensor, b: Tensor) -> Tensor:
    c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    rows = max(1, (a.shape[0] // 4) * 4)
    c[:rows] = (a[:rows].float() @ b.float()).to(a.dtype)
    return c


def kmeans_update_empty_to_zero(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    b, n, d = x.shape
    k = c_old.shape[1]
    sums = torch.zeros(b, k, d).scatter_add_(1, ids[:, :, None].expand(b, n, d), x.float())
    counts = torch.zeros(b, k).scatter_add_(1, ids, torch.ones(b, n))
    return (sums / counts.clamp(min=1)[:, :, None]).to(x.dtype)


def row_sum_nan_to_zero(x: Tensor) -> Tensor:
    return x.float().nan_to_num(0.0, 0.0, 0.0).sum(-1).to(x.dtype)


def softmax_returns_input_buffer(x: Tensor) -> Tensor:
    y = torch.softmax(x.float(), -1).to(x.dtype)
    return x.copy_(y) if x.is_contiguous() else y


@pytest.mark.parametrize(("op", "kernel", "gate"), [
    ("softmax", softmax_no_max_subtraction, "CMP-01"),
    ("row_sum", row_sum_drops_tail, "CMP-01"),
    ("row_sum", row_sum_fp16_accumulator, "PRC-02"),
    ("rmsnorm", rmsnorm_mutates_input, "MUTATE"),
    ("matmul", matmul_caches_by_shape, "REUSE"),
    ("matmul", matmul_leaves_tail_unwritten, "POISON"),
    ("kmeans_update", kmeans_update_empty_to_zero, "CMP-01"),
    ("row_sum", row_sum_nan_to_zero, "EXC-01"),
    ("softmax", softmax_returns_input_buffer, "ALIAS"),
])
def test_planted_bug_fails_its_gate(op: str, kernel, gate: str) -> None:
    _cache.clear()
    result = run_gate(gate, get_contract(op), kernel)
    assert result.status is GateStatus.FAIL, result
    assert result.replay_token is not None and result.replay_token.startswith(f"cake1:{op}:{gate}:")


def test_battery_stops_at_first_failure_and_names_every_gate() -> None:
    verdict = run_battery(get_contract("row_sum"), row_sum_drops_tail)
    assert not verdict.passed
    assert [g.gate_id for g in verdict.gates] == list(GATE_ORDER)
    first = verdict.failures[0]
    later = verdict.gates[[g.gate_id for g in verdict.gates].index(first.gate_id) + 1:]
    assert all(g.status is GateStatus.SKIP and "not run" in g.reason for g in later)
    assert Verdict.from_json(verdict.to_json()) == verdict


def matmul_through_byte_workspaces(a: Tensor, b: Tensor) -> Tensor:
    # Correct, with the scratch a library kernel allocates for itself (FlashKDA's fwd takes a torch.empty uint8
    # workspace): POISON fills it with its sentinels and must not overflow the byte dtypes (session 7 on the H200:
    # "value cannot be converted to type uint8_t without overflow" was the gate's own error, blamed on the kernel).
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.bool):
        torch.empty(16, dtype=dtype)
    return (a.float() @ b.float()).to(a.dtype)


def test_poison_fills_small_integer_workspaces_with_sentinels_that_fit() -> None:
    from cake.verifier.gates.exploits import poison_value
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool, torch.float16):
        first, second = (torch.full((1,), poison_value(dtype, w), dtype=dtype) for w in (0, 1))
        assert not torch.equal(first, second), dtype  # two different sentinels, or an unwritten byte hides
    _cache.clear()
    result = run_gate("POISON", get_contract("matmul"), matmul_through_byte_workspaces)
    assert result.status is GateStatus.PASS, result


def test_a_crash_is_a_runtime_error_never_a_pass() -> None:
    def crashes(x: Tensor) -> Tensor:
        raise ValueError("tile size must divide N")
    result = run_gate("CMP-01", get_contract("softmax"), crashes)
    assert result.status is GateStatus.RUNTIME_ERROR
    assert "ValueError: tile size must divide N" in result.reason and result.replay_token


def test_wrong_output_dtype_and_device_are_failures() -> None:
    result = run_gate("PRC-01", get_contract("softmax"), lambda x: torch.softmax(x.float(), -1))
    assert result.status is GateStatus.FAIL and "dtype" in result.reason


def test_kmeans_assign_accepts_exact_ties_and_int32() -> None:
    def last_of_ties(x: Tensor, c: Tensor) -> Tensor:
        d = torch.cdist(x.double(), c.double()) ** 2
        flipped = d.flip(-1).argmin(-1)  # the highest index among equal distances
        return (c.shape[1] - 1 - flipped).to(torch.int32)
    result = run_gate("CMP-01", get_contract("kmeans_assign"), last_of_ties, dtypes=["float32"])
    assert result.status is GateStatus.PASS, result


def test_res02_checks_the_report_against_the_arch() -> None:
    contract, kernel = get_contract("softmax"), get_controls("softmax").torch
    assert run_gate("RES-02", contract, kernel).status is GateStatus.SKIP
    ok = {"arch": "sm_90a", "registers_per_thread": 168, "smem_bytes": 200_000}
    assert run_gate("RES-02", contract, kernel, resource_report=ok).status is GateStatus.PASS
    over = {"arch": "sm_90a", "registers_per_thread": 255, "smem_bytes": 240_000}
    result = run_gate("RES-02", contract, kernel, resource_report=over)
    assert result.status is GateStatus.FAIL and "shared memory" in result.reason


def test_implausible_speed_flags_times_below_the_roofline() -> None:
    from cake.arch import DEVICES
    contract, shape = get_contract("matmul"), {"M": 8192, "N": 8192, "K": 8192}
    h200 = DEVICES["H200"]
    assert implausible_speed(contract, shape, torch.bfloat16, 1e-4, h200)  # 11 PFLOP/s
    assert not implausible_speed(contract, shape, torch.bfloat16, 1.6e-3, h200)  # ~690 TFLOP/s


def test_standard_check_is_fooled_where_the_gates_are_not() -> None:
    assert standard_check(get_contract("row_sum"), row_sum_nan_to_zero).passed
    assert not standard_check(get_contract("row_sum"), lambda x: x.sum(-1) * 2).passed


def test_unknown_op_lists_the_known_ones() -> None:
    with pytest.raises(UnknownOpError, match="known ops: kda_core, kda_forward, kmeans_assign, kmeans_update, matmul"):
        get_contract("flash_attention")


def test_every_gate_is_ordered() -> None:
    assert set(GATE_ORDER) == set(GATES)
    assert GATE_ORDER.index("RES-02") < GATE_ORDER.index("CMP-01") < GATE_ORDER.index("ORD-02")
