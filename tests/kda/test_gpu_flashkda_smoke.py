"""The CPU paths of scripts/gpu_flashkda_smoke.py (FlashKDA's smoke call on the H200) with a stand-in for FlashKDA
(fake_flash_kda): both cases reach the contract's comparison, a wrong module fails one, a missing one says how to
build it. FlashKDA's own numbers are judged on the GPU only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gpu_flashkda_smoke as smoke
import pytest
import torch
from fake_flash_kda import FakeFlashKDA


def test_both_cases_pass_against_a_correct_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeFlashKDA()
    monkeypatch.setitem(sys.modules, "flash_kda", fake)
    out = tmp_path / "smoke.json"
    assert smoke.main(["--json", str(out), "--device", "cpu"]) == 0
    data = json.loads(out.read_text())
    assert [c["case"] for c in data["cases"]] == ["varlen_128", "dense_64"]
    assert all(c["ok"] and c["finite"] for c in data["cases"])
    varlen, dense = fake.calls
    assert varlen["initial_state"] is not None and varlen["q"].shape == (1, 64, 2, 128)
    assert dense["initial_state"] is None and dense["q"].shape == (2, 33, 2, 128)  # 64 padded to FlashKDA's 128


def test_a_module_computing_the_wrong_state_fails_the_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class NoDecay(FakeFlashKDA):
        def fwd(self, *args: Any, **kwargs: Any) -> None:
            super().fwd(*args, **kwargs)
            kwargs["final_state"].mul_(1.5)

    monkeypatch.setitem(sys.modules, "flash_kda", NoDecay())
    out = tmp_path / "smoke.json"
    assert smoke.main(["--json", str(out), "--device", "cpu"]) == 1
    assert "final_state" in json.loads(out.read_text())["cases"][0]["reason"]


def test_without_flashkda_the_smoke_says_how_to_build_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "flash_kda", None)
    assert smoke.main(["--json", str(tmp_path / "smoke.json"), "--device", "cpu"]) == 2
    assert "scripts/gpu/flashkda_build.sh" in capsys.readouterr().err


def test_inputs_follow_the_case() -> None:
    q, _, v, _, beta, a_log, dt_bias, h0, cu = smoke.case_inputs(smoke.CASES[0], "cpu", 0)
    assert q.dtype == torch.bfloat16 and q.shape == (1, 64, 2, 128) and beta.shape == (1, 64, 2)
    assert cu.tolist() == [0, 17, 17, 64] and h0.shape == (3, 2, 128, 128) and h0.dtype == torch.float32
    assert a_log.dtype == dt_bias.dtype == torch.float32 and float(dt_bias.abs().max()) <= 4.0
