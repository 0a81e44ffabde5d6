"""The chunk-64 KDA schedule (experiments/kda/kda_fused_chunk64.cake: chunkpar's two launches with A's and P's
decays factored per block of SUB rows) under Triton's CPU interpreter: against the fp64 reference at both chunk
sizes and both block sizes, on tails that are not a multiple of 64, on a varlen batch with an empty sequence and
sequences across several chunks, and at the gate's extreme (every gate -5 on every channel: gc falls by 315 across a
chunk of 64, the case the exponent bound is about); bit for bit chunkpar's values at C = SUB = 32; no overflowing
exponential at SUB = 16; the kda_forward gates in fp32 and fp16 (the interpreter cannot compute bf16: the H200
runs those, scripts/gpu/s9_kda64.sh); and (slow) compiled for sm_90a."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

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

SCHEDULE = FORWARD.folder / "kda_fused_chunk64.cake"
CHUNKPAR = FORWARD.folder / "kda_fused_chunkpar.cake"
# fp32 kernel vs fp64 reference over up to 150 tokens: rounding only, far below any algorithmic slip (chunkpar's)
TOL = 2e-4
# a raw gate this large with exp(A_log) >= 1 saturates the safe gate's sigmoid: g = -5, the contract's lower bound




def _run(params: dict[str, int], inputs: tuple[torch.Tensor | None, ...],
         schedule: Path = SCHEDULE) -> tuple[torch.Tensor, torch.Tensor]:
    return load_schedule(schedule, params=json.dumps(params))(*inputs)


def _max_error(params: dict[str, int], shape: tuple[int, int, int, int, int], cuts: list[int] | None,
               extreme: bool) -> float:
    inputs = kda_inputs(*shape, cuts, extreme=extreme)
    o, state = _run(params, inputs)
    ref_o, ref_state = kda_forward(*(x.double() if x is not None and x.is_floating_point() else x for x in inputs))
    assert torch.isfinite(o).all() and torch.isfinite(state).all()
    scale = max(ref_o.abs().max().item(), ref_state.abs().max().item(), 1.0)
    return max((o.double() - ref_o).abs().max().item(), (state.double() - ref_state).abs().max().item()) / scale


CASES = [  # (B, T, H, K, V), cu_seqlens: tails off 64 and 32, K and V off the tile sizes, an empty sequence, a
    # sequence over three chunks of 64 beside ones shorter than a block of 16
    ((2, 37, 2, 16, 16), None),
    ((1, 150, 1, 17, 5), [0, 5, 5, 135, 150]),
]
BLOCKINGS = [(64, 16), (64, 32), (32, 16)]  # (C, SUB); (32, 32) is chunkpar's factoring, below


@pytest.mark.parametrize(("blocking", "case", "extreme"), list(itertools.product(BLOCKINGS, CASES, (False, True))),
                         ids=lambda x: "x".join(map(str, x if isinstance(x[0], int) else x[0]))
                         if isinstance(x, tuple) else str(x))
def test_chunk64_matches_the_fp64_reference(blocking: tuple[int, int],
                                            case: tuple[tuple[int, int, int, int, int], list[int] | None],
                                            extreme: bool) -> None:
    (chunk, sub), (shape, cuts) = blocking, case
    # BV 16 and BK 16: at K = 17 intra walks two K slices, the second masked past K; recur two V tiles at V = 16
    assert _max_error({"C": chunk, "SUB": sub, "BV": 16, "BK": 16}, shape, cuts, extreme) < TOL


def test_one_block_of_32_is_chunkpars_factoring_bit_for_bit() -> None:
    # C = SUB = 32: one block whose reference is the chunk's middle row, every mask true: the same exponents,
    # products and sums as chunkpar at C = 32, so the same bits (the header's equivalence claim)
    inputs = kda_inputs(1, 150, 2, 17, 5, [0, 5, 5, 135, 150], extreme=False)
    params = {"C": 32, "BV": 16, "BK": 16}
    ours, theirs = _run({**params, "SUB": 32}, inputs), _run(params, inputs, CHUNKPAR)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_no_exponential_overflows_at_blocks_of_16() -> None:
    # The exponent bound made observable: with every gate at -5, gc falls by 5 a row over the whole chunk. At
    # SUB = 16 every factor's exponent is at most 40 and every product of two at most e^75, so the interpreter
    # (numpy) computes no overflowing exp, product or sum; at SUB = 32 the discarded entries above the diagonal do
    # overflow (e^155), as chunkpar's do, and `where` discards them.
    inputs = kda_inputs(1, 128, 1, 16, 16, None, extreme=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        o, state = _run({"C": 64, "SUB": 16, "BV": 16, "BK": 16}, inputs)
    assert torch.isfinite(o).all() and torch.isfinite(state).all()
    with pytest.warns(RuntimeWarning, match="overflow"):
        _run({"C": 64, "SUB": 32, "BV": 16, "BK": 16}, inputs)


def test_chunk64_keeps_what_feeds_the_state_in_fp32_and_its_launches() -> None:
    # chunkpar's guard on the scratch types (the interpreter cannot compute bf16): what recur reads to update the
    # state is fp32, only the output's operands are staged in E; two launches, intra's block-row loop nested in its
    # K-slice loop.
    kernel = parse(SCHEDULE.read_text(), str(SCHEDULE))
    assert [launch.name for launch in kernel.launches] == ["intra", "recur"]
    elems = {s.name: s.type.elem for s in kernel.scratch}
    assert elems == {"ws": DType.F32, "us": DType.F32, "kls": DType.F32, "gls": DType.F32,
                     "qds": TypeVar("E"), "ps": TypeVar("E")}, elems
    defaults = {p.name: p.default for p in kernel.params}
    assert defaults["C"] == 64 and defaults["SUB"] == 16
    source = lower(kernel, "triton", arch="sm_90a", filename=str(SCHEDULE)).source
    assert source.count("@triton.jit") == 2


def _gates_in_a_fresh_process(dtypes: list[str], gates: list[str] | None) -> None:
    # A fresh process: TRITON_INTERPRET must be set before Triton defines any kernel.
    script = (
        "import json, sys; from cake.verifier import run_battery, get_contract\n"
        "from cake.experiments.kda.adapt import load_schedule, schedule_op\n"
        "path, dtypes, gates = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])\n"
        "v = run_battery(get_contract(schedule_op(path)), load_schedule(path), interpreter=True, dtypes=dtypes,\n"
        "                gates=gates)\n"
        "print(json.dumps([v.passed, [f.reason for f in v.failures]]))\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", script, str(SCHEDULE), json.dumps(dtypes), json.dumps(gates)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    passed, failures = json.loads(proc.stdout.splitlines()[-1])
    assert passed, failures


def test_chunk64_passes_cmp01_in_fp32() -> None:
    _gates_in_a_fresh_process(["float32"], ["CMP-01"])


@pytest.mark.slow
def test_chunk64_passes_every_kda_forward_gate_in_fp32_and_fp16() -> None:
    # the whole battery (about 140 s on this CPU), as `cake verify --schedule ... --device cpu` runs it
    _gates_in_a_fresh_process(["float32", "float16"], None)


# Spill bytes a thread at the defaults (no register cap) for the benchmark's bf16 K = V = 128, Triton 3.9 for sm_90a:
# intra 0, recur 256 (4 warps; the header's table). A bound, so that neither grows back unnoticed.
SPILL_LIMIT = {"intra": 64, "recur": 320}


@pytest.mark.slow
def test_chunk64_compiles_for_sm_90a() -> None:
    rows = compiled_rows(SCHEDULE, timeout=900)
    benchmark = next(r for r in rows if r["K"] == 128)
    spills = {u["launch"]: u["spill_bytes"] for u in benchmark["launches"]}
    assert all(spills[name] <= bound for name, bound in SPILL_LIMIT.items()), spills
