"""Calibration per (backend, device, toolchain): a file per key, loaded for the candidate's backend only; a key
with no file is an explicit uncalibrated state that predictions carry."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors, current_codegen
from cake.ir.cost_calibrations import (
    BENCH_CLOCK,
    CALIBRATION_DIR,
    KERNEL_CLOCK,
    Calibration,
    CalibrationFileError,
    CalibrationKey,
    calibration_for,
    calibrations,
    store_calibration,
    timed_toolchain,
    toolchain_key,
)
from cake.ir.parser import parse

PLAIN = parse((Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / "assign_plain.cake").read_text())
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}
TRITON = CalibrationKey("triton", "H200", "triton-3.6.0+torch-2.11.0")


def _cal(key: CalibrationKey, tensor: float = 1.5, day: str = "2026-12-01") -> Calibration:
    return Calibration(key, Factors(tensor=tensor), 60, day, {"runs": {"fake/run": 60}})


def test_a_key_loads_for_its_backend_and_toolchain_only(tmp_path: Path) -> None:
    store_calibration(_cal(TRITON), tmp_path)
    store_calibration(_cal(TRITON, tensor=1.25), tmp_path)  # same key: replaced, not added
    assert [c.key for c in calibrations(tmp_path)] == [TRITON]
    exact = calibration_for("triton", "H200", TRITON.toolchain, tmp_path)
    assert exact.calibrated and exact.factors == Factors(tensor=1.25) and exact.calibration is not None
    assert exact.calibration.provenance == {"runs": {"fake/run": 60}}
    # Another backend on the same device and toolchain: never Triton's factors.
    cuda = calibration_for("cuda", "H200", TRITON.toolchain, tmp_path)
    assert not cuda.calibrated and cuda.factors == Factors() and "cuda" in cuda.reason
    other = calibration_for("triton", "H200", "triton-3.9.0+torch-2.13.0", tmp_path)
    assert not other.calibrated and TRITON.toolchain in other.reason  # it names what is calibrated
    assert not calibration_for(None, "H200", None, tmp_path).calibrated
    assert not calibration_for("triton", "B200", None, tmp_path).calibrated


def test_an_unnamed_toolchain_takes_the_newest_of_the_backend_and_says_so(tmp_path: Path) -> None:
    newer = replace(TRITON, toolchain="triton-3.7.0+torch-2.12.0")
    store_calibration(_cal(TRITON, 1.5, "2026-11-30"), tmp_path)
    store_calibration(_cal(newer, 2.0, "2026-12-02"), tmp_path)
    state = calibration_for("triton", "H200", None, tmp_path)
    assert state.calibrated and state.calibration is not None and state.calibration.key == newer
    assert "toolchain not given" in state.label


def test_an_unnamed_toolchain_never_prices_todays_code_with_a_fit_of_older_code(tmp_path: Path) -> None:
    # Fitted the same day, an older codegen's key sorts after the current one's by name ('u' > '1'); the
    # current codegen's fit is still the one taken.
    codegen = current_codegen("cuda")
    assert codegen is not None and codegen != "1"
    current = CalibrationKey("cuda", "H200", timed_toolchain("nvcc-13.0.88+torch-2.11.0", codegen, "graph"))
    older = CalibrationKey("cuda", "H200", timed_toolchain("nvcc-unrecorded+torch-2.11.0", "1", "events"))
    for key in (current, older):
        store_calibration(_cal(key, 1.5, "2026-12-04"), tmp_path)
    state = calibration_for("cuda", "H200", None, tmp_path)
    assert state.calibration is not None and state.calibration.key == current
    assert f"codegen {codegen}" in state.label

def test_an_unnamed_toolchain_prefers_a_fit_of_the_callers_clock(tmp_path: Path) -> None:
    # An evolve run ranks for its bench (device events around the eager call): a fit of kernel-only graph replays,
    # even a newer one, prices what the bench does not time.
    codegen = current_codegen("cuda")
    assert codegen is not None
    graph = CalibrationKey("cuda", "H200", timed_toolchain("nvcc-13.0.88+torch-2.11.0", codegen, "graph"))
    events = CalibrationKey("cuda", "H200", timed_toolchain("nvcc-13.0.88+torch-2.11.0", codegen, BENCH_CLOCK))
    store_calibration(_cal(events, 1.5, "2026-12-04"), tmp_path)
    store_calibration(_cal(graph, 2.0, "2026-12-05"), tmp_path)
    state = calibration_for("cuda", "H200", None, tmp_path, clock=BENCH_CLOCK)
    assert state.calibration is not None and state.calibration.key == events
    assert f"timed by {BENCH_CLOCK}" in state.label
    # no fit of that clock: the newest of the codegen
    assert calibration_for("cuda", "H200", None, tmp_path, clock="other").calibration.key == graph  # type: ignore[union-attr]


def test_an_unnamed_clock_is_the_kernel_only_one_whatever_the_dates(tmp_path: Path) -> None:
    # The model prices device work; a newer fit of eager calls (host work inside the events) does not replace the fit
    # of graph replays for a caller that names no clock (it did, by date and then by name, until session 26).
    codegen = current_codegen("cuda")
    assert codegen is not None
    graph = CalibrationKey("cuda", "H200", timed_toolchain("nvcc-13.0.88+torch-2.11.0", codegen, KERNEL_CLOCK))
    events = CalibrationKey("cuda", "H200", timed_toolchain("nvcc-13.0.88+torch-2.11.0", codegen, BENCH_CLOCK))
    store_calibration(_cal(graph, 2.0, "2026-12-04"), tmp_path)
    store_calibration(_cal(events, 1.5, "2026-12-05"), tmp_path)
    state = calibration_for("cuda", "H200", None, tmp_path)
    assert state.calibration is not None and state.calibration.key == graph
    assert f"timed by {KERNEL_CLOCK}" in state.label
    assert calibration_for("cuda", "H200", None, tmp_path, clock=BENCH_CLOCK).calibration.key == events  # type: ignore[union-attr]


def test_a_file_that_does_not_hold_its_key_is_an_error_not_a_state(tmp_path: Path) -> None:
    path = store_calibration(_cal(TRITON), tmp_path)
    path.rename(tmp_path / "cuda__H200__x.json")
    with pytest.raises(CalibrationFileError, match="rename it"):
        calibrations(tmp_path)
    (tmp_path / "cuda__H200__x.json").write_text(json.dumps({"backend": "cuda"}))
    with pytest.raises(CalibrationFileError, match="not a calibration"):
        calibrations(tmp_path)


def test_predictions_carry_the_calibration_state() -> None:
    prior = predict(PLAIN, dims=CELL, factors=Factors())
    assert prior.calibration.kind == "explicit"
    unnamed = predict(PLAIN, dims=CELL)
    assert unnamed.calibration.kind == "uncalibrated" and unnamed.time_s == prior.time_s
    never = predict(PLAIN, dims=CELL, backend="cuda", toolchain="nvcc-0.0+torch-0.0")
    cuda_prior = predict(PLAIN, dims=CELL, backend="cuda", factors=Factors())
    assert never.calibration.kind == "uncalibrated" and never.time_s == cuda_prior.time_s
    assert never.to_json()["calibration"]["kind"] == "uncalibrated"
    triton = predict(PLAIN, dims=CELL, backend="triton", toolchain=TRITON.toolchain)
    assert triton.calibration.calibrated and triton.calibration.calibration is not None
    assert triton.calibration.calibration.key == TRITON and triton.time_s != prior.time_s


def test_every_committed_calibration_states_its_provenance() -> None:
    committed = calibrations(CALIBRATION_DIR)
    assert committed, "the committed Triton calibration is missing"
    for cal in committed:
        assert cal.provenance.get("runs"), f"{cal.key}: no runs in its provenance"
        assert "held_out_by_run" in cal.provenance or "held_out" in cal.provenance


def test_toolchain_keys_drop_local_suffixes() -> None:
    assert toolchain_key({"triton": "3.6.0", "torch": "2.11.0+cu130"}) == "triton-3.6.0+torch-2.11.0"
    assert toolchain_key({"nvcc": "13.0.88", "torch": "2.11.0"}) == "nvcc-13.0.88+torch-2.11.0"
    with pytest.raises(ValueError):
        toolchain_key({})
    with pytest.raises(ValueError, match="unknown backend"):
        CalibrationKey("opencl", "H200", "x")


def test_timed_runs_key_their_codegen_version_and_clock() -> None:
    assert timed_toolchain("nvcc-13.0.88+torch-2.11.0", "4", "graph") == "nvcc-13.0.88+torch-2.11.0+codegen-4+graph"
    assert CalibrationKey("cuda", "H200", timed_toolchain("nvcc-13.0.88", "1-or-2", "events")).file_name == \
        "cuda__H200__nvcc-13.0.88+codegen-1-or-2+events.json"
    for codegen, clock in (("", "events"), ("4", "cuda graph"), ("4/5", "events")):
        with pytest.raises(ValueError, match="plain token"):
            timed_toolchain("nvcc-13.0.88", codegen, clock)


def test_the_cuda_backends_dot_is_priced_as_it_lowers_it() -> None:
    from cake.ir.cost_calibration import constants_for
    from cake.lowering.cuda.dialects import DOT_FAMILY

    assert constants_for("sm_90a", "cuda").dot_lowers_to == DOT_FAMILY.value
    assert constants_for("sm_90a", "triton").dot_lowers_to == constants_for("sm_90a").dot_lowers_to == "wgmma"
    as_cuda = predict(PLAIN, dims=CELL, backend="cuda", factors=Factors())
    as_triton = predict(PLAIN, dims=CELL, backend="triton", factors=Factors())
    assert as_cuda.launches[0].work.tensor_flops > as_triton.launches[0].work.tensor_flops  # mma.sync's rate
