"""The evaluator's glue that a CPU can test: a bench's typed result becomes the workload's score, the
kernel reference names backend and arch explicitly, and the verdict a bench stores is found again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cake.experiments.kmeans.shapes import CAKE_CELL
from cake.experiments.kmeans.workload import WORKLOAD
from cake.verifier.timing import Measurement, Verification
from conftest import SEED  # at import time: a lazy import can meet another folder's conftest under xdist

from cake.evaluation.bench import BenchRun, BenchTimes, ShapeReport


def _m(name: str, median: float | None, candidate: bool = False, failure: str | None = None,
       implausible: bool = False) -> Measurement:
    return Measurement(name, candidate, median, median, median, 10 if median else 0, None, None, None, None, 0.7,
                       implausible, failure)


def _run(*measurements: Measurement) -> BenchRun:
    unavailable = () if any(m.name == "torch_mm" for m in measurements) else (("torch_mm", "not requested"),)
    return BenchRun("kmeans_assign", "k", "H200", (ShapeReport(CAKE_CELL, measurements, unavailable),))


def test_bench_times_become_the_workload_score_and_survive_json() -> None:
    times = _run(_m("candidate", 1.25, candidate=True), _m("flash_kmeans", 1.564), _m("triton_assign", 1.4),
                 _m("torch_mm", 24.0), _m("plain_sweep_best", 1.3)).times()
    assert times.candidate == {"cake_cell": 1.25}
    assert times.baselines["flash_kmeans"] == {"cake_cell": 1.564} and times.baselines["triton_assign"] == {"cake_cell": 1.4}
    assert BenchTimes.from_json(json.loads(json.dumps(times.to_json()))) == times  # what crosses the process boundary
    # against the best baseline; plain_sweep_best is a CAKE reference, not one of them
    assert WORKLOAD.fitness.score(times.candidate, times.baselines) == 1.4 / 1.25


def test_a_failed_or_missing_baseline_makes_the_score_undefined_with_its_reason() -> None:
    times = _run(_m("candidate", 1.25, candidate=True), _m("flash_kmeans", 1.564),
                 _m("triton_assign", None, failure="wrong before timing (input set 0): ids differ")).times()
    speedup = WORKLOAD.fitness.speedup(times.candidate, times.baselines, times.problems)
    assert speedup.value is None and WORKLOAD.fitness.score(times.candidate, times.baselines) is None
    assert "baseline triton_assign: wrong before timing" in str(speedup.undefined)
    assert "baseline torch_mm: not available: not requested" in str(speedup.undefined)


def test_a_refused_wrong_or_implausible_candidate_has_no_score() -> None:
    for bad in (_m("candidate", None, candidate=True, failure="re-check failed"),
                _m("candidate", 0.1, candidate=True, implausible=True)):
        times = _run(bad, _m("flash_kmeans", 1.564)).times()
        assert times.candidate == {} and WORKLOAD.fitness.score(times.candidate, times.baselines) is None
    refused = BenchRun("kmeans_assign", "k", "H200", refused=(("bfloat16", Verification(False, "battery", "EXC-01")),))
    assert refused.times().refused == "bfloat16: EXC-01" and not refused.all_timed


def test_the_evaluator_names_backend_and_arch_in_the_kernel_ref_not_the_environment(tmp_path, monkeypatch) -> None:
    from cake.agents.cake_toolchain import CakeToolchain, EvalSettings

    for name in ("CAKE_BACKEND", "CAKE_ARCH"):
        monkeypatch.delenv(name, raising=False)
    toolchain = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                              settings=EvalSettings(device="cpu", backend="triton", seed=3,
                                                    verdict_cache=str(tmp_path / "verdicts")))
    assert "CAKE_BACKEND" not in os.environ and "CAKE_ARCH" not in os.environ
    evaluator = toolchain.evaluator
    ref = evaluator.kernel(SEED).ref()
    assert dict(ref.options) == {"backend": "triton", "arch": "sm_90a"}
    assert evaluator.kernel(SEED).ref().source_hash() != \
        type(evaluator.kernel(SEED))(SEED, "cuda", "sm_90a").ref().source_hash()  # the cache keys on the backend
    assert evaluator.cached_verdict(SEED, "float32", device="cpu") is None
    verdict = evaluator.verify(SEED, "cpu", ["float32"])  # what the bench worker does, on the CPU
    assert evaluator.cached_verdict(SEED, "float32", device="cpu") == verdict


def test_declared_dtypes_are_the_schedules_type_variable_as_far_as_the_backend_lowers_it() -> None:
    """The dtypes a candidate is gated in: its type variable's choices, less those its backend refuses for every
    call. Session 8's GPU evolve gated the plain seed in f32 on the CUDA backend, whose `via dot` takes 16-bit
    operands only (E0611): the worker died on the refusal and the seed scored as a RUNTIME_ERROR."""
    from cake.agents.cake_toolchain import CakeToolchain, EvalSettings

    def declared(backend: str, schedule: str) -> tuple[str, ...]:
        toolchain = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                                  settings=EvalSettings(device="cpu", backend=backend, seed=0))
        dtypes = toolchain.evaluator.declared_dtypes(Path(SEED).parent / schedule)
        assert dtypes[0] == str(toolchain.shape.torch_dtype).removeprefix("torch.")  # the fitness dtype first
        return dtypes

    assert set(declared("cuda", "assign_pingpong.cake")) == {"bfloat16", "float16"}
    assert set(declared("triton", "assign_plain.cake")) == {"float32", "float16", "bfloat16"}
    assert set(declared("cuda", "assign_plain.cake")) == {"float16", "bfloat16"}


def test_a_gpu_run_of_the_cuda_backend_ranks_with_the_spills_ptxas_reports(tmp_path, monkeypatch) -> None:
    """The static model sees no spill where roles declare register budgets: session 19's H200 evolve timed a
    ping-pong whose consumers ran at 80 registers (ptxas: 1.3 KB of spill stores) at 15.0 ms and had predicted it
    at 1.8 ms, among the best of its turn. On a GPU run of the CUDA backend the turn's candidates are compiled
    (nvcc compiles here without a GPU) and priced with those spills."""
    from cake.agents.cake_toolchain import CakeToolchain, EvalSettings
    from cake.agents.mutations import with_param_default
    from cake.ir.parser import parse
    from cake.ir.transforms.warp_specialize import warp_specialize

    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path / "cache"))
    pingpong = warp_specialize(parse(Path(SEED).read_text(), "seed.cake"))
    assert pingpong is not None
    roomy, starved = (with_param_default(with_param_default(pingpong, "BK", 64), "CONSUMER_REGS", regs)
                      for regs in (192, 80))
    cpu = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                        settings=EvalSettings(device="cpu", backend="cuda", seed=0))
    gpu = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                        settings=EvalSettings(device="cuda", backend="cuda", seed=0))
    assert not cpu.ranks_with_compiler and gpu.ranks_with_compiler
    static = cpu.predict_many([roomy, starved])
    compiled = gpu.predict_many([roomy, starved])
    assert static[0] is not None and static[1] is not None and compiled[0] is not None and compiled[1] is not None
    # the static model tells the two budgets apart by a fraction (the calibration's correction reads the registers)
    assert abs(static[1] - static[0]) < 0.5 * static[0]
    assert compiled[0] == static[0]  # nothing spills at 192 registers
    assert compiled[1] > 3 * compiled[0]  # at 80 the spills dominate


def test_a_candidate_that_does_not_build_is_ranked_by_the_static_model(monkeypatch) -> None:
    """Not ranked last: its evaluation must still run to record the compile failure (a checker gap) where the
    distiller and the report see it."""
    from cake.agents.cake_toolchain import CakeToolchain, EvalSettings
    from cake.ir.parser import parse
    from cake.lowering.cuda import backend as cuda_backend

    from cake.diagnostics import Diagnostic, DiagnosticError

    def fails(*_: object, **__: object) -> dict[str, float]:
        raise DiagnosticError((Diagnostic("C0900", "ptxas: out of resources"),))

    monkeypatch.setattr(cuda_backend, "compiled_spills", fails)
    kernel = parse(Path(SEED).read_text(), "seed.cake")
    gpu = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                        settings=EvalSettings(device="cuda", backend="cuda", seed=0))
    assert gpu.predict_many([kernel]) == [gpu.predict_ms(kernel)] != [None]


def test_a_gpu_run_ranks_for_the_gpu_that_times_it(monkeypatch) -> None:
    """Session 27 ranked an H100 run with the H200's model; the run now prices for the GPU present, and says so."""
    from cake.agents import cake_toolchain
    from cake.agents.cake_toolchain import CakeToolchain, EvalSettings
    from cake.ir.cost import predict
    from cake.ir.cost_calibrations import BENCH_CLOCK
    from cake.ir.parser import parse

    from cake.arch import DEVICES

    monkeypatch.setattr(cake_toolchain, "_gpu_name", lambda device: "NVIDIA H100 80GB HBM3")
    gpu = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                        settings=EvalSettings(device="cuda", backend="cuda", seed=0))
    assert gpu.rank_device is DEVICES["H100-SXM5"]
    assert "ranked by the cost model for H100-SXM5 (the GPU present (NVIDIA H100 80GB HBM3))" in gpu.describe()
    kernel = parse(Path(SEED).read_text(), "seed.cake")
    on = {name: predict(kernel, dims=gpu.shape.dim_map, dtype=cake_toolchain._DTYPES[gpu.shape.dtype],
                        arch_name="sm_90a", device=name, backend="cuda", clock=BENCH_CLOCK).time_ms
          for name in ("H100-SXM5", "H200")}
    assert gpu.predict_ms(kernel) == on["H100-SXM5"] != on["H200"]


@pytest.mark.parametrize(("config", "device", "reason"), [
    ({"device": "NVIDIA H100 80GB HBM3", "eval": {"device": "cuda", "backend": "cuda"}}, "H100-SXM5",
     "the GPU the run recorded (NVIDIA H100 80GB HBM3)"),
    ({"eval": {"device": "cuda", "backend": "cuda"}}, "H200", "the run recorded no GPU: sm_90a's default device"),
    ({"eval": {"device": "cpu", "backend": "triton"}}, "H200", "no GPU in this process: sm_90a's default device"),
])
def test_a_stored_run_is_ranked_again_for_the_gpu_it_recorded(config: dict, device: str, reason: str) -> None:
    """Replays (`scripts/rank_run_candidates.py`, `replay_ranking.py`) rank a stored run as it ranked: an H100
    run's candidates once were priced again for the H200 and with Triton's model, and its rho read 0.387."""
    from cake.agents.cake_toolchain import CakeToolchain, EvalSettings, Ranker

    stored = {"workload": "flash_kmeans", "op": "kmeans_assign", "arch": "sm_90a", **config}
    ranker = Ranker.for_run(stored)
    assert (ranker.device.name, ranker.device_reason) == (device, reason)
    assert ranker.backend == config["eval"]["backend"]
    assert ranker.with_compiler == (config["eval"]["device"] == "cuda")
    assert not Ranker.for_run(stored, with_compiler=False).with_compiler
    # the loop's own ranker for the same run prices a schedule the same way
    from cake.ir.parser import parse

    kernel = parse(Path(SEED).read_text(), "seed.cake")
    loop = CakeToolchain(workload="flash_kmeans", op="kmeans_assign", arch="sm_90a", seeds=[SEED],
                         settings=EvalSettings(device="cpu", backend=ranker.backend, seed=0))
    if device == loop.rank_device.name:
        assert Ranker.for_run(stored, with_compiler=False).predict_ms(kernel) == loop.predict_ms(kernel) is not None
