"""The real toolchain's glue that a CPU can test: reading `cake bench --json` and scoring it."""

from __future__ import annotations

import json

from cake.agents.cake_toolchain import bench_medians, bench_problems
from cake.experiments.kmeans.shapes import CAKE_CELL
from cake.experiments.kmeans.workload import WORKLOAD
from cake.verifier.timing import Measurement
from conftest import SEED  # at import time: a lazy import can meet another folder's conftest under xdist

from cake.cli.bench import ShapeReport


def _m(name: str, median: float | None, candidate: bool = False, failure: str | None = None,
       implausible: bool = False) -> Measurement:
    return Measurement(name, candidate, median, median, median, 10 if median else 0, None, None, None, None, 0.7,
                       implausible, failure)


def _payload(*measurements: Measurement) -> dict:
    report = ShapeReport(CAKE_CELL, measurements, (("torch_mm", "not requested"),))
    return json.loads(json.dumps({"op": "kmeans_assign", "shapes": [report.to_json()]}))


def test_bench_json_becomes_the_workload_score() -> None:
    data = _payload(_m("candidate", 1.25, candidate=True), _m("flash_kmeans", 1.564), _m("triton_assign", 1.4),
                    _m("torch_mm", 24.0), _m("plain_sweep_best", 1.3))
    candidate, baselines = bench_medians(data, "cake_cell")
    assert candidate == {"cake_cell": 1.25}
    assert baselines["flash_kmeans"] == {"cake_cell": 1.564} and baselines["triton_assign"] == {"cake_cell": 1.4}
    # against the best baseline; plain_sweep_best is a CAKE reference, not one of them
    assert WORKLOAD.fitness.score(candidate, baselines) == 1.4 / 1.25


def test_a_failed_or_missing_baseline_makes_the_score_undefined_with_its_reason() -> None:
    data = _payload(_m("candidate", 1.25, candidate=True), _m("flash_kmeans", 1.564),
                    _m("triton_assign", None, failure="wrong before timing (input set 0): ids differ"))
    candidate, baselines = bench_medians(data, "cake_cell")
    speedup = WORKLOAD.fitness.speedup(candidate, baselines, bench_problems(data, "cake_cell"))
    assert speedup.value is None and WORKLOAD.fitness.score(candidate, baselines) is None
    assert "baseline triton_assign: wrong before timing" in str(speedup.undefined)
    assert "baseline torch_mm: not available: not requested" in str(speedup.undefined)


def test_a_refused_or_implausible_candidate_has_no_score() -> None:
    for bad in (_m("candidate", None, candidate=True, failure="re-check failed"),
                _m("candidate", 0.1, candidate=True, implausible=True)):
        candidate, baselines = bench_medians(_payload(bad, _m("flash_kmeans", 1.564)), "cake_cell")
        assert candidate == {} and WORKLOAD.fitness.score(candidate, baselines) is None


def test_the_verdict_cake_bench_stores_is_found_without_running_anything(tmp_path, monkeypatch) -> None:
    from cake.agents.cake_toolchain import CakeToolchain, EvalSettings

    for name in ("CAKE_BACKEND", "CAKE_ARCH"):  # the toolchain sets them for its workers; restored after the test
        monkeypatch.setenv(name, "")

    toolchain = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                              settings=EvalSettings(device="cpu", backend="triton", seed=3,
                                                    verdict_cache=str(tmp_path / "verdicts")))
    assert toolchain._cached_verdict(SEED, "float32", device="cpu") is None
    verdict = toolchain._verify(SEED, "cpu", ["float32"])  # what `cake bench` does, on the CPU
    assert toolchain._cached_verdict(SEED, "float32", device="cpu") == verdict
