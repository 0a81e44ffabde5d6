"""A measured fitness is timed at every shape it names. The kda workload scores the geomean over the six FlashKDA
shapes; the evaluator used to time only the first and then ask for the speedup at all six, so the H200's
`cake evolve --op kda` (session 16) gated and timed its seed in 258 s and called its speedup undefined ("at
h96_varlen_mixed: baseline fla_chunk_kda: no time")."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cake.experiments.workload import get_workload

from cake.evaluation import evaluator as ev
from cake.evaluation.bench import BenchRequest, BenchTimes
from cake.evaluation.evaluator import BENCH_SECONDS_PER_EXTRA_SHAPE, EvalSettings, ScheduleEvaluator
from cake.evaluation.protocol import EvalJob


def _evaluator(op: str, workload: str) -> ScheduleEvaluator:
    return ScheduleEvaluator(op=op, workload=workload, arch="sm_90a",
                             settings=EvalSettings(device="cuda", backend="triton", seed=0),
                             against=("fla_chunk_kda",))


def test_the_fitness_op_is_timed_at_every_fitness_shape_and_scored_by_their_geomean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workload = get_workload("kda")
    names = workload.fitness.shapes
    assert len(names) == 6
    candidate = {name: 1.0 + i / 10 for i, name in enumerate(names)}
    fla = {name: 2.0 for name in names}
    seen: dict[str, object] = {}

    def worker(request: BenchRequest, device: str, *, timeout_s: float, **_: object) -> tuple[BenchTimes, str]:
        seen.update(shapes=tuple(s.name for s in request.shapes), timeout_s=timeout_s)
        return BenchTimes(candidate, {"fla_chunk_kda": fla}, {}), ""

    monkeypatch.setattr(ev, "run_bench_worker", worker)
    path = tmp_path / "abc.cake"
    path.write_text("schedule")
    evaluator = _evaluator("kda_forward", "kda")
    retime = evaluator.retime(EvalJob(1, "abc", path, None), "cuda")
    assert seen["shapes"] == names
    assert seen["timeout_s"] == evaluator.settings.bench_timeout_s + 5 * BENCH_SECONDS_PER_EXTRA_SHAPE
    geomean = math.exp(sum(math.log(2.0 / candidate[n]) for n in names) / len(names))
    assert retime.error is None and retime.fitness == pytest.approx(geomean)
    assert retime.measured_ms == candidate[names[0]]  # measured_ms stays the first shape's median


def test_a_shape_missing_from_the_timing_makes_the_speedup_undefined_and_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = get_workload("kda").fitness.shapes
    times = BenchTimes({n: 1.0 for n in names[:-1]}, {"fla_chunk_kda": {n: 2.0 for n in names}}, {})
    monkeypatch.setattr(ev, "run_bench_worker", lambda request, device, **_: (times, ""))
    path = tmp_path / "abc.cake"
    path.write_text("schedule")
    retime = _evaluator("kda_forward", "kda").retime(EvalJob(1, "abc", path, None), "cuda")
    assert retime.fitness is None and f"at {names[-1]}: candidate: no time" in (retime.error or "")


def test_another_op_is_timed_at_its_first_gpu_shape() -> None:
    workload = get_workload("kda")
    assert workload.fitness_shapes("kda_core") == (workload.op("kda_core").gpu_shapes[0],)
    assert workload.fitness_shape("kda_forward").name == workload.fitness.shapes[0]


def test_timings_name_the_first_shape_plainly_and_the_rest_by_shape() -> None:
    times = BenchTimes({"a": 1.0, "b": 2.0}, {"fla_chunk_kda": {"a": 3.0, "b": 4.0}}, {})
    assert ev._timings(times, ("a", "b")) == {"candidate_ms": 1.0, "fla_chunk_kda_ms": 3.0,
                                              "candidate_ms@b": 2.0, "fla_chunk_kda_ms@b": 4.0}
