"""The FlashKDA baseline's adapter (experiments/kda/baselines.py `flash_kda_forward`) on the CPU, against a stand-in
for FlashKDA's extension: how the kda_forward contract's arguments map onto `flash_kda.fwd` (scale, lower bound,
V-first state, zero padding to FlashKDA's one head width, contiguity). The stand-in computes with the fp64
reference, so these tests judge the mapping, never FlashKDA's numbers: those are the GPU gates' job
(`cake verify --kernel experiments/kda/audit_targets.py:flash_kda`, scripts/gpu/s7_fkda7.sh)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch
from cake.experiments.kda import baselines
from cake.experiments.kda import reference as ref
from cake.experiments.workload import BaselineUnavailable
from cake.verifier import get_contract, run_battery
from fake_flash_kda import WIDTH, FakeFlashKDA


def _inputs(batch: int, total: int, heads: int, dk: int, dv: int, *, varlen: bool, with_state: bool,
            sliced: bool = False) -> tuple[Any, ...]:
    gen = torch.Generator().manual_seed(7)

    def randn(*size: int) -> torch.Tensor:
        if sliced:  # a window into a wider buffer: not contiguous
            return torch.randn(*size[:-1], size[-1] + 3, generator=gen).to(torch.bfloat16)[..., : size[-1]]
        return torch.randn(*size, generator=gen).to(torch.bfloat16)

    cu = torch.tensor([0, 4, 4, total], dtype=torch.int64) if varlen else None  # one empty sequence
    if cu is not None and sliced:
        cu = torch.stack([cu, cu], dim=1)[:, 0]  # every other element of a buffer: strided
    count = 3 if varlen else batch
    h0 = torch.randn(count, heads, dk, dv, generator=gen) if with_state else None
    return (randn(batch, total, heads, dk), randn(batch, total, heads, dk), randn(batch, total, heads, dv),
            randn(batch, total, heads, dk), randn(batch, total, heads), torch.rand(heads, generator=gen) * 2.0,
            torch.randn(heads, dk, generator=gen), h0, cu)


@pytest.mark.parametrize(("batch", "varlen", "with_state"), [(1, True, True), (2, False, False)])
def test_zero_padding_to_flashkdas_width_gives_the_contracts_outputs(batch: int, varlen: bool,
                                                                     with_state: bool) -> None:
    inputs = _inputs(batch, 9, 2, 17, 5, varlen=varlen, with_state=with_state, sliced=True)
    assert not inputs[0].is_contiguous()  # the fake refuses what the adapter does not make contiguous
    fake = FakeFlashKDA()
    o, state = baselines.flash_kda_forward(fake, *inputs)
    want_o, want_state = ref.kda_forward(*(None if t is None else t.double() if t.is_floating_point() else t
                                           for t in inputs))
    assert o.shape == want_o.shape and o.dtype == torch.bfloat16 and state.shape == want_state.shape
    torch.testing.assert_close(o.double(), want_o.to(torch.bfloat16).double(), rtol=1e-2, atol=1e-3)
    torch.testing.assert_close(state.double(), want_state, rtol=1e-5, atol=1e-6)


def test_the_call_maps_scale_gate_bound_and_the_v_first_state() -> None:
    inputs = _inputs(1, 9, 2, 17, 5, varlen=True, with_state=True)
    fake = FakeFlashKDA()
    baselines.flash_kda_forward(fake, *inputs)
    (call,) = fake.calls
    assert call["scale"] == pytest.approx(17 ** -0.5)  # the true K's, not FlashKDA's padded 128
    assert call["lower_bound"] == ref.LOWER_BOUND
    dt_bias, h0 = call["dt_bias"], call["initial_state"]
    assert dt_bias[:, :17].equal(inputs[6]) and not dt_bias[:, 17:].any()
    assert call["q"].shape == (1, 9, 2, WIDTH) and not call["q"][..., 17:].any() and not call["v"][..., 5:].any()
    assert h0.shape == (3, 2, WIDTH, WIDTH)
    assert h0[:, :, :5, :17].equal(inputs[7].transpose(-1, -2))  # V-first
    assert not h0[:, :, 5:].any() and not h0[:, :, :, 17:].any()


def test_at_flashkdas_width_contiguous_inputs_go_in_uncopied() -> None:
    inputs = _inputs(1, 5, 1, WIDTH, WIDTH, varlen=False, with_state=False)
    fake = FakeFlashKDA()
    o, _ = baselines.flash_kda_forward(fake, *inputs)
    (call,) = fake.calls
    assert all(call[name] is tensor for name, tensor in zip("qkvg", inputs[:4], strict=True))
    assert call["initial_state"] is None and o.data_ptr() == call["out"].data_ptr()


def test_wider_heads_are_refused_before_any_call() -> None:
    fake = FakeFlashKDA()
    with pytest.raises(ValueError, match="head widths up to 128 .* got K=192, V=128"):
        baselines.flash_kda_forward(fake, *_inputs(1, 3, 1, 192, WIDTH, varlen=False, with_state=False))
    assert fake.calls == []


def test_loading_without_flashkda_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "flash_kda", None)  # an import of it raises ImportError
    with pytest.raises(BaselineUnavailable, match="scripts/gpu/flashkda_build.sh"):
        baselines.load_flash_kda()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_loading_flashkda_without_a_gpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "flash_kda", FakeFlashKDA())
    with pytest.raises(BaselineUnavailable, match="CUDA only"):
        baselines.load_flash_kda()


@pytest.mark.slow
def test_the_adapter_passes_the_gates_over_a_reference_computing_stand_in() -> None:
    """Every gate's inputs (widths 17 and 5, strided layouts, empty sequences, aliasing and reuse probes) go
    through the adapter into the stand-in: a failure here is the adapter's, which would otherwise be blamed on
    FlashKDA on the GPU. About a minute on a CPU; the whole battery passed too (2 min, session 7)."""
    fake = FakeFlashKDA()
    verdict = run_battery(get_contract("kda_forward"), lambda *inputs: baselines.flash_kda_forward(fake, *inputs),
                          dtypes=[torch.bfloat16], all_gates=True,
                          gates=["CMP-01", "CMP-03", "ALIAS", "REUSE", "POISON", "ORD-02"])
    assert verdict.passed, verdict
    assert {call["q"].shape[-1] for call in fake.calls} == {WIDTH}  # every call reached FlashKDA's width
    assert len({call["scale"] for call in fake.calls}) > 1  # from several true widths K (17 among them)
