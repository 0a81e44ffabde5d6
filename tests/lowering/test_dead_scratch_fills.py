"""Dead scratch fills in `cake bench`'s own runtimes: a scratch buffer that `cake.ir.overwrite` proves a launch
stores whole before any read is allocated without its init fill (Triton: `torch.empty` in the generated
launcher; CUDA: the same where the allocation is exactly the declared shape).

The generated sources of the shipped schedules allocate exactly the proven buffers without a fill, and the
kernels still pass their gates under the interpreter with every `torch.empty` of a generated launcher
POISONED (NaN, or a garbage integer): a proof that claims a buffer some element of which is read before it
is written changes the results. The last test shows that the poison bites: a wrong proof fails the gates.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from cake.ir.parser import parse
from cake.lowering.cache import KernelCache
from cake.lowering.cuda.backend import _scratch
from cake.lowering.runtime import load, lower, read_schedule
from cake.verifier.battery import run_battery
from cake.verifier.registry import get_contract
from cake.verifier.results import GateStatus
from lowering_cases import REPO

KMEANS = REPO / "experiments" / "kmeans"
KDA = REPO / "experiments" / "kda"
GENERATED = "cake_generated_"  # the module name prefix of every loaded Triton module (TritonBackend.load)
GARBAGE_INT = 0x2BAD_F00D  # an integer far outside any id, count or offset a kernel computes


def _allocations(source: str) -> dict[str, str]:
    """Each scratch buffer of the generated launcher and how it is allocated: `empty`, or `full` when its spec carries
    a fill value (`_k_rec.scratch(device, ((name, shape, dtype, fill or None), ...))`, one spec a line)."""
    specs = source.split("= _k_rec.scratch(")[1].split("\n    ))")[0]
    return {m.group(1): "empty" if m.group(2) == "None" else "full"
            for m in re.finditer(r"^        \('(\w+)', .*, ([^,]+)\),$", specs, re.M)}


@pytest.mark.parametrize(("schedule", "unfilled", "filled"), [
    (KDA / "kda_fused_chunkpar.cake", {"ws", "us", "kls", "qds", "ps", "gls"}, set()),
    # slots of C rows a chunk, each written whole by its chunk's program (`c*C : +C` over rows `NC * C`)
    (KDA / "kda_fused_varlen.cake", {"ws", "us", "kls", "qds", "ps", "gls"}, set()),
    (KDA / "kda_fused_varlen_split.cake", {"ws", "us", "kls", "qds", "ps", "gls", "tms"}, set()),
    (KMEANS / "update_ranked.cake", {"counts", "starts"}, {"hist", "perm"}),
    (KMEANS / "update_sorted.cake", {"counts", "starts"}, {"hist", "perm"}),
    (KMEANS / "update_atomic.cake", set(), {"sums", "counts"}),
    (KMEANS / "assign_plain_norms.cake", {"csq_g"}, set()),
], ids=lambda x: x.stem if isinstance(x, Path) else None)
def test_generated_launcher_fills_only_what_is_not_proven_overwritten(schedule: Path, unfilled: set[str],
                                                                     filled: set[str]) -> None:
    kernel = parse(schedule.read_text(), str(schedule))
    source = lower(kernel, "triton", arch="sm_90a", filename=str(schedule)).source
    allocs = _allocations(source)
    scratch = {s.name for s in kernel.scratch}
    assert scratch == unfilled | filled
    assert {name for name in scratch if allocs[name] == "empty"} == unfilled
    assert {name for name in scratch if allocs[name] == "full"} == filled


@pytest.fixture
def poisoned_empty(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[torch.Tensor]]:
    """Every `torch.empty` a generated launcher calls (outputs and unfilled scratch) comes back full of NaN or
    GARBAGE_INT, as stale device memory might; the list records them, so a test can see the poison was laid."""
    real = torch.empty
    laid: list[torch.Tensor] = []

    def empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        tensor = real(*args, **kwargs)
        if sys._getframe(1).f_globals.get("__name__", "").startswith(GENERATED):
            tensor.fill_(math.nan if tensor.is_floating_point() else GARBAGE_INT)
            laid.append(tensor)
        return tensor

    monkeypatch.setattr(torch, "empty", empty)
    yield laid


def _battery_failures(kernel: Any, op: str, **options: Any) -> list[str]:
    verdict = run_battery(get_contract(op), kernel, device="cpu", interpreter=True, dtypes=["float32"], **options)
    assert [g for g in verdict.gates if g.status is not GateStatus.SKIP], "no gate ran"
    return [f"{g.gate_id}: {g.reason}" for g in verdict.gates if g.status.is_failure]


def _loaded(path: Path, params: dict[str, int] | None = None) -> Any:
    kernel, text = read_schedule(str(path))
    return load(lower(kernel, "triton", params=params, filename=str(path), source_text=text))


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [KMEANS / "assign_plain_norms.cake", KMEANS / "update_ranked.cake",
                                      KMEANS / "update_sorted.cake"], ids=lambda p: p.stem)
def test_kmeans_schedules_pass_their_gates_with_poisoned_scratch(schedule: Path, interpreter: None,
                                                                 poisoned_empty: list[torch.Tensor]) -> None:
    kernel = _loaded(schedule)
    assert _battery_failures(kernel, kernel.lowered.op) == []
    assert poisoned_empty, "the poison was never laid: the generated launcher did not call torch.empty"


def test_chunkpar_kda_passes_cmp01_with_poisoned_scratch(interpreter: None,
                                                          poisoned_empty: list[torch.Tensor]) -> None:
    # none of its eight scratch buffers is filled; CMP-01 covers varlen (cu_seqlens) and adversarial values
    from cake.experiments.kda.adapt import load_schedule, schedule_op

    path = str(KDA / "kda_fused_chunkpar.cake")
    assert _battery_failures(load_schedule(path), schedule_op(path), gates=["CMP-01"]) == []
    assert len(poisoned_empty) >= 8


def test_a_wrong_proof_fails_the_gates(interpreter: None, poisoned_empty: list[torch.Tensor],
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # update_atomic accumulates into `sums` and `counts`: their zero fill is live. A proof that claimed them
    # would leave the poison in the sums, and the gates must say so.
    from cake.lowering.triton import module

    monkeypatch.setattr(module, "overwritten_scratch", lambda kernel: {s.name: "wrong" for s in kernel.scratch})
    # renamed, so that its cache key (and loaded module) is its own, and in a private cache
    path = KMEANS / "update_atomic.cake"
    ir, text = read_schedule(str(path))
    kernel = load(lower(replace(ir, name="update_atomic_wrong_proof"), "triton", filename=str(path),
                        source_text=text), cache=KernelCache(tmp_path))
    assert _allocations(kernel.lowered.source)["sums"] == "empty"
    failures = _battery_failures(kernel, "kmeans_update", gates=["CMP-01"])
    assert failures and all(f.startswith("CMP-01") for f in failures), failures


@pytest.mark.parametrize(("shape", "dead_fill", "filled"), [
    ((2, 8), True, False),  # f32 rows of 32 bytes: exactly the declared shape, the fill is skipped
    ((2, 8), False, True),  # not proven: filled
    ((2, 7), True, True),  # rows padded to 16 bytes: the padding is never written, so it keeps its fill
])
def test_cuda_scratch_skips_the_fill_only_when_unpadded(shape: tuple[int, int], dead_fill: bool, filled: bool,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_empty, real_full = torch.empty, torch.full
    monkeypatch.setattr(torch, "empty", lambda *a, **k: calls.append("empty") or real_empty(*a, **k))
    monkeypatch.setattr(torch, "full", lambda *a, **k: calls.append("full") or real_full(*a, **k))
    buf = _scratch(shape, torch.float32, 0.0, "cpu", dead_fill=dead_fill)
    assert buf.shape == shape
    assert ("full" in calls) is filled
    if filled:
        assert float(buf.abs().sum()) == 0.0


def test_cuda_specialization_carries_the_proof_of_the_kernel_it_generated(monkeypatch: pytest.MonkeyPatch) -> None:
    # the ping-pong's ||c||^2 (`csq_g`) is stored whole by `centroid_norms`: the runtime may skip its fill
    from cake.lowering.cuda import launch
    from cake.lowering.cuda.backend import CudaKernel

    path = KMEANS / "assign_pingpong.cake"
    fn = CudaKernel(parse(path.read_text(), str(path)), "sm_90a", str(path))
    monkeypatch.setattr(fn, "compile", lambda program, target: SimpleNamespace(cubin=b""))  # no nvcc, no device
    monkeypatch.setattr(launch, "CudaModule", lambda *args: object())
    spec = fn.specialize({}, {"B": 1, "N": 256, "K": 128, "D": 128}, (9, 0), 0)
    assert spec.dead_fills == {"csq_g"}


@pytest.mark.parametrize("chunk", [16, 32])
def test_chunkpar_kda_matches_the_reference_with_poisoned_scratch_at_tails(chunk: int, interpreter: None,
                                                                         poisoned_empty: list[torch.Tensor]) -> None:
    # T and K, V off the tile sizes, an empty sequence, T not a multiple of the chunk: the masked edges of
    # every buffer the intra and recur launches store whole (hs and vns inside recur's loop over the chunks)
    from cake.experiments.kda.adapt import load_schedule
    from cake.experiments.kda.reference import kda_forward

    run = load_schedule(str(KDA / "kda_fused_chunkpar.cake"), params=f'{{"C": {chunk}, "BV": 16}}')
    gen = torch.Generator().manual_seed(0)
    total, heads, dk, dv = 70, 1, 17, 5
    q, k, g = (torch.randn(1, total, heads, dk, generator=gen) for _ in range(3))
    v = torch.randn(1, total, heads, dv, generator=gen)
    beta = torch.randn(1, total, heads, generator=gen)
    a_log = torch.empty(heads).uniform_(1.0, 16.0, generator=gen).log()
    dt_bias = torch.randn(heads, dk, generator=gen)
    cuts = torch.tensor([0, 5, 5, 45, 70], dtype=torch.int64)
    h0 = torch.randn(len(cuts) - 1, heads, dk, dv, generator=gen)
    inputs = (q, k, v, g, beta, a_log, dt_bias, h0, cuts)
    o, state = run(*inputs)
    ref_o, ref_state = kda_forward(*(x.double() if x.is_floating_point() else x for x in inputs))
    scale = max(ref_o.abs().max().item(), ref_state.abs().max().item(), 1.0)
    assert torch.isfinite(o).all() and torch.isfinite(state).all()
    assert max((o.double() - ref_o).abs().max().item(), (state.double() - ref_state).abs().max().item()) < 2e-4 * scale
    assert len(poisoned_empty) >= 8


def test_varlen_native_kda_matches_the_staged_schedule_with_poisoned_scratch(interpreter: None,
                                                                             poisoned_empty: list[torch.Tensor]) -> None:
    # kda_fused_varlen's six scratch buffers are slots written whole by intra (a dead row as 0): with every one of
    # them poisoned, a sequence's partial last chunk, an empty sequence and K, V off the tiles still give exactly
    # what the staged schedule gives (its launches per sequence, its own scratch poisoned too), in fp16
    from cake.experiments.kda.adapt import load_schedule

    gen = torch.Generator().manual_seed(0)
    total, heads, dk, dv = 70, 1, 17, 5
    q, k, g = (torch.randn(1, total, heads, dk, generator=gen).half() for _ in range(3))
    v = torch.randn(1, total, heads, dv, generator=gen).half()
    beta = torch.randn(1, total, heads, generator=gen).half()
    a_log = torch.empty(heads).uniform_(1.0, 16.0, generator=gen).log()
    dt_bias = torch.randn(heads, dk, generator=gen)
    cuts = torch.tensor([0, 5, 5, 45, 70], dtype=torch.int64)
    h0 = torch.randn(len(cuts) - 1, heads, dk, dv, generator=gen)
    inputs = (q, k, v, g, beta, a_log, dt_bias, h0, cuts)
    params = '{"C": 16, "BV": 16, "BK": 16}'
    o, state = load_schedule(str(KDA / "kda_fused_varlen.cake"), params=params)(*inputs)
    laid = len(poisoned_empty)
    staged_o, staged_state = load_schedule(str(KDA / "kda_fused_staged.cake"), params=params)(*inputs)
    assert laid >= 7, "o and the six scratch buffers are allocated without a fill"
    assert torch.isfinite(o).all() and torch.equal(o, staged_o) and torch.equal(state, staged_state)

