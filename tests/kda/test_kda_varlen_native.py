"""The varlen-native KDA schedule (experiments/kda/kda_fused_varlen.cake: the staged schedule's two launches, each one
grid over every sequence, which it finds in two tables the wrapper builds) under Triton's CPU interpreter in fp16:
bit-identical to the staged schedule launched per sequence (the same operations, only addressed differently), the
fp64 reference on a dense batch, the tables, a batch with no tokens, and (slow) every kda_forward gate in fp16."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cake.experiments.kda.adapt import load_schedule, sequence_tables
from cake.experiments.kda.reference import kda_forward
from cake.experiments.kda.workload import FORWARD
from kda_inputs import kda_inputs

NATIVE = FORWARD.folder / "kda_fused_varlen.cake"
STAGED = FORWARD.folder / "kda_fused_staged.cake"
SPLIT = FORWARD.folder / "kda_fused_varlen_split.cake"
TOL = 2e-3  # test_kda_staged.py's: a few fp16 roundings of the largest values


def _half(inputs: tuple[torch.Tensor | None, ...]) -> list[torch.Tensor | None]:
    staged = list(inputs)
    staged[:5] = [x.half() for x in staged[:5] if x is not None]  # q, k, v, g, beta in the input dtype
    return staged


def test_the_tables_list_every_chunk_of_every_sequence_and_each_sequence_first_chunk() -> None:
    chunks, seqs = sequence_tables([0, 5, 5, 45, 70], 16, torch.device("cpu"))
    assert chunks.dtype == seqs.dtype == torch.int32
    assert chunks.tolist() == [[0, 5], [5, 45], [21, 45], [37, 45], [45, 70], [61, 70]]
    assert seqs.tolist() == [[0, 5, 0], [5, 5, 1], [5, 45, 1], [45, 70, 4]]
    # kept on the device for the next call of the same batch structure, not copied in again
    assert sequence_tables([0, 5, 5, 45, 70], 16, torch.device("cpu"))[0] is chunks
    assert sequence_tables([0, 5, 5, 45, 70], 32, torch.device("cpu"))[0].tolist() == [[0, 5], [5, 45], [37, 45],
                                                                                      [45, 70]]


# (schedule, the schedule it must equal bit for bit): one launch pair over every sequence against the staged
# schedule's pair per sequence; intra split in two launches (Tm handed on in fp32 slots) against one intra launch
SAME_VALUES = [(NATIVE, STAGED), (SPLIT, NATIVE)]


@pytest.mark.parametrize(("schedule", "reference"), SAME_VALUES, ids=lambda p: p.stem)
@pytest.mark.parametrize("chunk", [16, 32])
def test_a_schedule_changes_no_value_of_the_one_it_reorganizes(schedule: Path, reference: Path, chunk: int) -> None:
    params = json.dumps({"C": chunk, "BV": chunk, "BK": chunk})
    # K and V off the tile sizes, an empty sequence, a sequence shorter than a chunk, tails of every chunk size
    inputs = _half(kda_inputs(1, 70, 1, 17, 5, [0, 5, 5, 45, 70], extreme=True))
    o, state = load_schedule(schedule, params=params)(*inputs)
    same_o, same_state = load_schedule(reference, params=params)(*inputs)
    assert torch.equal(o, same_o) and torch.equal(state, same_state)
    ref_o, ref_state = kda_forward(*(x.double() if x is not None and x.is_floating_point() else x for x in inputs))
    assert (o.double() - ref_o).abs().max() / max(ref_o.abs().max(), 1.0) < TOL
    assert (state.double() - ref_state).abs().max() / max(ref_state.abs().max(), 1.0) < TOL


def test_a_dense_batch_is_one_row_of_sequences_against_the_fp64_reference() -> None:
    inputs = _half(kda_inputs(2, 37, 2, 16, 16, None, extreme=False))
    o, state = load_schedule(NATIVE, params='{"C": 16, "BV": 16, "BK": 16}')(*inputs)
    ref_o, ref_state = kda_forward(*(x.double() if x is not None and x.is_floating_point() else x for x in inputs))
    assert o.shape == (2, 37, 2, 16) and state.shape == (2, 2, 16, 16)
    assert (o.double() - ref_o).abs().max() / max(ref_o.abs().max(), 1.0) < TOL
    assert (state.double() - ref_state).abs().max() / max(ref_state.abs().max(), 1.0) < TOL


def test_a_batch_without_tokens_returns_the_initial_states() -> None:
    inputs = _half(kda_inputs(1, 0, 2, 16, 16, [0, 0, 0], extreme=False))
    h0 = torch.randn(2, 2, 16, 16)
    inputs[-2] = h0
    o, state = load_schedule(NATIVE)(*inputs)
    assert o.shape == (1, 0, 2, 16) and torch.equal(state, h0) and state.data_ptr() != h0.data_ptr()


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [NATIVE, SPLIT], ids=lambda p: p.stem)
def test_varlen_native_passes_every_kda_forward_gate_in_fp16_under_the_interpreter(schedule: Path) -> None:
    script = (
        "import json, sys; from cake.verifier import run_battery, get_contract\n"
        "from cake.experiments.kda.adapt import load_schedule, schedule_op\n"
        "v = run_battery(get_contract(schedule_op(sys.argv[1])), load_schedule(sys.argv[1]), interpreter=True,\n"
        "                dtypes=['float16'])\n"
        "print(json.dumps([v.passed, [f'{f.gate_id}: {f.reason}' for f in v.failures]]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(schedule)], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    passed, failures = json.loads(proc.stdout.splitlines()[-1])
    assert passed, failures
