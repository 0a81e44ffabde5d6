"""Which baselines a measured fitness is over: a run refuses to start while one of them cannot run on its host
(the H200's first `cake evolve --op kda` spent 323 s gating and timing its seed only to find FlashKDA not
installed, the speedup undefined), and `--against` narrows the set by name, in the run's config and its
speedups."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.experiments.workload import get_workload

from cake.cli.common import UsageError
from cake.cli.evolve import new_config, parse_evolve_args, require_fitness_baselines
from cake.evaluation import evaluator as ev
from cake.evaluation.bench import BenchRequest, BenchTimes
from cake.evaluation.evaluator import EvalSettings, ScheduleEvaluator
from cake.evaluation.protocol import EvalJob

SHAPE = "cake_cell"


def test_narrowed_keeps_the_declared_order_and_refuses_names_it_does_not_declare() -> None:
    fitness = get_workload("flash_kmeans").fitness
    assert fitness.narrowed(["torch_mm", "triton_assign"]).against == ("triton_assign", "torch_mm")
    assert fitness.narrowed(["torch_mm"]).shapes == fitness.shapes
    for names, said in ((["flash_kda"], "not one of them: flash_kda"), ([], "name at least one")):
        with pytest.raises(ValueError, match=said):
            fitness.narrowed(names)


def test_against_is_stored_in_the_config_and_an_unknown_name_is_a_usage_error() -> None:
    config = new_config(parse_evolve_args(["--op", "kda", "--device", "cpu", "--against", "fla_chunk_kda"],
                                          where="test"))
    assert config["eval"]["against"] == ["fla_chunk_kda"]
    full = new_config(parse_evolve_args(["--op", "kda", "--device", "cpu"], where="test"))
    assert full["eval"]["against"] == ["fla_chunk_kda", "flash_kda"]
    with pytest.raises(UsageError, match="--against: .*not one of them: torch_mm"):
        new_config(parse_evolve_args(["--op", "kda", "--device", "cpu", "--against", "torch_mm"], where="test"))


def _gpu_config(against: list[str]) -> dict:
    return {"workload": "kda", "op": "kda_forward", "eval": {"device": "cuda", "against": against}}


def test_a_measured_run_refuses_to_start_naming_each_missing_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    workload = get_workload("kda")
    spec = workload.op(workload.fitness.op)
    fla = spec.baseline("fla_chunk_kda")
    monkeypatch.setattr(type(fla), "status",
                        lambda self: "available" if self.name == "fla_chunk_kda" else "flash_kda is not importable")
    with pytest.raises(UsageError) as refused:
        require_fitness_baselines(_gpu_config(["fla_chunk_kda", "flash_kda"]))
    assert "flash_kda: flash_kda is not importable" in str(refused.value)
    assert "--against fla_chunk_kda" in str(refused.value)
    require_fitness_baselines(_gpu_config(["fla_chunk_kda"]))  # narrowed to what runs here: starts


def test_with_no_baseline_runnable_it_says_to_install_one() -> None:
    # On this CPU host neither fla nor FlashKDA is installed
    with pytest.raises(UsageError, match="fla_chunk_kda: .*flash_kda: .*install at least one of them"):
        require_fitness_baselines(_gpu_config(["fla_chunk_kda", "flash_kda"]))
    require_fitness_baselines({"workload": "kda", "op": "kda_forward", "eval": {"device": "cpu"}})  # model fitness


def test_another_op_is_scored_over_its_own_baselines_and_one_with_none_refuses_a_gpu_run() -> None:
    workload = get_workload("flash_kmeans")
    update = workload.fitness_for("kmeans_update")
    assert update.op == "kmeans_update" and update.shapes == (workload.op("kmeans_update").gpu_shapes[0].name,)
    assert update.against == tuple(b.name for b in workload.op("kmeans_update").baselines) != ()
    assert workload.fitness_for("kmeans_assign") == workload.fitness
    assert get_workload("kda").fitness_for("kda_core").against == ()  # kda_core declares no baseline
    with pytest.raises(UsageError, match="kda_core declares no baselines.*--device cpu"):
        require_fitness_baselines({"workload": "kda", "op": "kda_core", "eval": {"device": "cuda", "against": []}})


def test_a_narrowed_evaluator_scores_over_its_baselines_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    times = BenchTimes({SHAPE: 0.5}, {"triton_assign": {SHAPE: 0.6}, "torch_mm": {SHAPE: 2.0}},
                       {"flash_kmeans": "not available: flash-kmeans is not installed"})

    def worker(request: BenchRequest, device: str, **_: object) -> tuple[BenchTimes, str]:
        assert request.baselines == ("triton_assign", "torch_mm")  # the bench is not asked for the others
        return times, ""

    monkeypatch.setattr(ev, "run_bench_worker", worker)
    path = tmp_path / "abc.cake"
    path.write_text("schedule")
    evaluator = ScheduleEvaluator(op="kmeans_assign", workload="flash_kmeans", arch="sm90",
                                  settings=EvalSettings(device="cuda", backend="triton", seed=0),
                                  against=("triton_assign", "torch_mm"))
    retime = evaluator.retime(EvalJob(1, "abc", path, None), "cuda")
    assert retime.fitness == pytest.approx(0.6 / 0.5) and retime.error is None
