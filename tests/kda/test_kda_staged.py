"""The staged KDA schedule (experiments/kda/kda_fused_staged.cake: chunkpar with w, u, the state entering a chunk
and vn rounded to the input dtype where the contract's chunked control rounds them) under Triton's CPU interpreter
in fp16 (the interpreter cannot compute bf16; the schedule serves no fp32): against the fp64 reference at each chunk
size, on a varlen batch with an empty sequence and at the gate's extreme; where it rounds (its scratch types and
recur's product forms); and (slow) every kda_forward gate in fp16 and the sm_90a compile without spills."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest
import torch
from cake.experiments.kda.adapt import load_schedule
from cake.experiments.kda.reference import kda_forward
from cake.experiments.kda.workload import FORWARD
from cake.ir.nodes import DType, TypeVar
from cake.ir.parser import parse
from cake.lowering.runtime import lower
from kda_aot import compiled_rows
from kda_inputs import kda_inputs

SCHEDULE = FORWARD.folder / "kda_fused_staged.cake"
# fp16 staging of w, u, the state and vn: a few fp16 roundings (2^-11) of the largest values over tens of tokens.
# Measured here: 5.2e-4 (o) and 3.9e-4 (state); an algorithmic slip (a decay off by one row, a missing beta) is
# O(1e-1) on these inputs.
TOL = 2e-3
CASES = [  # (B, T, H, K, V), cu_seqlens: tails of every chunk size, K and V off the tile sizes, an empty sequence
    ((2, 37, 2, 16, 16), None),
    ((1, 70, 1, 17, 5), [0, 5, 5, 45, 70]),
]


def _relative_errors(chunk: int, shape: tuple[int, int, int, int, int], cuts: list[int] | None,
                     extreme: bool) -> tuple[float, float]:
    run = load_schedule(SCHEDULE, params=f'{{"C": {chunk}, "BV": {chunk}, "BK": {chunk}}}')
    inputs = list(kda_inputs(*shape, cuts, extreme=extreme))
    inputs[:5] = [x.half() for x in inputs[:5]]  # q, k, v, g, beta in the input dtype; the rest as the contract's
    o, state = run(*inputs)
    ref_o, ref_state = kda_forward(*(x.double() if x is not None and x.is_floating_point() else x for x in inputs))
    assert o.dtype == torch.float16 and state.dtype == torch.float32
    assert torch.isfinite(o).all() and torch.isfinite(state).all()
    return ((o.double() - ref_o).abs().max().item() / max(ref_o.abs().max().item(), 1.0),
            (state.double() - ref_state).abs().max().item() / max(ref_state.abs().max().item(), 1.0))


@pytest.mark.parametrize(("chunk", "case", "extreme"), list(itertools.product((16, 32), CASES, (False, True))),
                         ids=lambda x: str(x) if not isinstance(x, tuple) else "x".join(map(str, x[0])))
def test_staged_matches_the_fp64_reference_in_fp16(chunk: int, case: tuple[tuple[int, int, int, int, int],
                                                   list[int] | None], extreme: bool) -> None:
    shape, cuts = case
    o_error, state_error = _relative_errors(chunk, shape, cuts, extreme)
    assert o_error < TOL and state_error < TOL, (o_error, state_error)


def test_staged_rounds_where_the_chunked_control_rounds() -> None:
    # The control (experiments/kda/controls.py, chunk_step) rounds w, u, the state entering a chunk and vn to the
    # input dtype, and keeps the decayed keys kl and the state fp32: so do the scratch types here (the interpreter
    # cannot show a bf16 rounding, so the types are the guard) and recur's products.
    kernel = parse(SCHEDULE.read_text(), str(SCHEDULE))
    elems = {s.name: s.type.elem for s in kernel.scratch}
    assert elems == {"ws": TypeVar("E"), "us": TypeVar("E"), "kls": DType.F32, "gls": DType.F32,
                     "qds": TypeVar("E"), "ps": TypeVar("E")}, elems
    assert {t.name: set(t.choices) for t in kernel.dtype_vars} == {"E": {DType.F16, DType.BF16}}
    source = lower(kernel, "triton", arch="sm_90a", filename=str(SCHEDULE)).source
    intra, recur = source.split("def kda_fused_staged_recur")
    recur = recur.split("\ndef ")[0]
    # the state update multiplies vn (16-bit values, exact in TF32) by the fp32 kl once; vn = u - w S on 16-bit
    # operands; intra's products end rounded to E, so each is one TF32 product; nothing runs three any more
    assert recur.count('input_precision="tf32")') == 1 and "tf32x3" not in source, recur
    assert intra.count('input_precision="tf32")') >= 5, intra


def _battery_in_a_fresh_process(dtype: str) -> tuple[bool, list[str]]:
    # TRITON_INTERPRET must be set before Triton defines any kernel, so the battery runs in a process of its own
    script = (
        "import json, sys; from cake.verifier import run_battery, get_contract\n"
        "from cake.experiments.kda.adapt import load_schedule, schedule_op\n"
        "v = run_battery(get_contract(schedule_op(sys.argv[1])), load_schedule(sys.argv[1]), interpreter=True,\n"
        "                dtypes=[sys.argv[2]])\n"
        "print(json.dumps([v.passed, [f'{f.gate_id}: {f.reason}' for f in v.failures]]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(SCHEDULE), dtype], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    passed, failures = json.loads(proc.stdout.splitlines()[-1])
    return passed, failures


@pytest.mark.slow
def test_staged_passes_every_kda_forward_gate_in_fp16_under_the_interpreter() -> None:
    passed, failures = _battery_in_a_fresh_process("float16")
    assert passed, failures


@pytest.mark.slow
def test_staged_compiles_for_sm_90a_without_spills_in_recur() -> None:
    # Uncapped: recur needs 162 registers at BV = 32 (chunkpar: 255 with spills, its three-TF32 state products
    # split every fp32 operand in two); Triton 3.9 for sm_90a here.
    for row in compiled_rows(SCHEDULE, '{"REGS_RECUR": 255}', timeout=900):
        recur = next(u for u in row["launches"] if u["launch"] == "recur")
        assert recur["spill_bytes"] == 0 and recur["registers_per_thread"] < 255, row
