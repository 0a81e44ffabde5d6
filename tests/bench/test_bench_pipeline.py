"""`cake bench --pipeline`: step naming, refusals, the whole-run check, and the timing glue on a scripted clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cake.experiments.kmeans import baselines as fkb
from cake.experiments.kmeans.workload import LLOYD
from cake.experiments.workload import Baseline, Prepared, Shape, get_pipeline
from cake.verifier.registry import get_contract
from cake.verifier.timing import TimingConfig, Verification, make_inputs
from scripted_clock import Tick

from cake.arch import DEVICES
from cake.cli import main
from cake.evaluation.bench import BenchSetupError, load_baselines
from cake.evaluation.pipeline_bench import (
    CANDIDATE,
    resolve_steps,
    sample_inputs,
    step_ref,
    time_shape,
)

ROOT = Path(__file__).resolve().parents[2]
KMEANS = ROOT / "experiments" / "kmeans"
CONTROL_ASSIGN = f"kmeans_assign={KMEANS / 'controls.py'}:kmeans_assign"
CONTROL_UPDATE = f"kmeans_update={KMEANS / 'controls.py'}:kmeans_update"
BUGS = ROOT / "tests" / "verifier" / "corpus" / "bugs_kmeans.py"


@pytest.fixture(scope="module")
def verdict_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verdicts")  # shared by this module's tests: each control is gated once


@pytest.fixture(autouse=True)
def private_verdict_cache(verdict_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAKE_VERDICT_CACHE", str(verdict_dir))


def test_the_lloyd_pipeline_is_declared_with_its_check_and_defaults() -> None:
    workload, pipeline = get_pipeline("lloyd_iteration")
    assert workload.name == "flash_kmeans" and pipeline is LLOYD
    assert pipeline.check is not None and pipeline.output_check is not None
    assert dict(pipeline.default_steps) == {"kmeans_assign": "assign_pingpong.cake@cuda",
                                            "kmeans_update": "update_ranked.cake@triton"}


def test_step_sources_name_schedules_with_a_backend_or_callables() -> None:
    ref = step_ref("kmeans_update", "update_onehot.cake@triton", KMEANS)
    assert ref.argument == str(KMEANS / "update_onehot.cake") and dict(ref.options) == {"backend": "triton"}
    assert step_ref("kmeans_assign", "controls.py:kmeans_assign", KMEANS).target == str(KMEANS / "controls.py")
    with pytest.raises(BenchSetupError, match="unknown backend"):
        step_ref("kmeans_update", "update_onehot.cake@metal", KMEANS)


def test_a_missing_default_update_stops_and_says_what_to_pass(tmp_path: Path) -> None:
    from dataclasses import replace

    pipeline = replace(LLOYD, default_steps=(("kmeans_assign", "assign_plain.cake"),
                                             ("kmeans_update", "update_sorted_absent.cake@triton")))
    with pytest.raises(BenchSetupError, match=r"update_sorted_absent.cake does not exist.*--step kmeans_update="):
        resolve_steps(pipeline, [], tmp_path)
    steps = resolve_steps(pipeline, [CONTROL_UPDATE], tmp_path)  # naming the step replaces the missing default
    assert [op for op, _ in steps] == ["kmeans_assign", "kmeans_update"]


@pytest.mark.parametrize("argv, message", [
    (["--step", "kmeans_assign"], "not of the form OP="),
    (["--step", "kmeans_norm=x.cake"], "not a step of lloyd_iteration"),
    (["--step", CONTROL_UPDATE, "--step", CONTROL_UPDATE], "names kmeans_update twice"),
    (["--baseline", "nope"], "no baseline 'nope'"),
    (["--shapes", "nope"], "neither a known shape"),
    (["--op", "kmeans_assign"], "drop --op"),
])
def test_pipeline_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bench", "--pipeline", "lloyd_iteration", "--step", CONTROL_ASSIGN]
    if not any(a.startswith("kmeans_update=") for a in argv):
        base += ["--step", CONTROL_UPDATE]
    assert main([*base, *argv]) == 2
    assert message in capsys.readouterr().err


def test_unknown_pipeline_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--pipeline", "nope"]) == 2
    assert "no workload declares a pipeline 'nope'" in capsys.readouterr().err


def test_step_outside_a_pipeline_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--op", "kmeans_update", "--kernel", CONTROL_UPDATE.split("=", 1)[1],
                 "--step", CONTROL_UPDATE]) == 2
    assert "--step names the kernels of a --pipeline" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_controls_on_cpu_pass_gates_and_check_and_nothing_is_timed(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lloyd.json"
    assert main(["bench", "--pipeline", "lloyd_iteration", "--step", CONTROL_ASSIGN, "--step", CONTROL_UPDATE,
                 "--json", str(out)]) == 2
    assert "nothing was timed" in capsys.readouterr().err
    data = json.loads(out.read_text())
    assert [v["passed"] for v in data["verifications"]] == [True, True]
    (shape,) = data["shapes"]
    assert shape["shape"]["name"] == "cpu_tiny" and shape["check"]["ok"] is True
    assert len(shape["check"]["records"]) == LLOYD.iterations
    assert shape["measurements"] == [] and "no CUDA device" in shape["not_timed"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_a_step_failing_its_gates_is_refused_and_neither_checked_nor_timed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lloyd.json"
    bad = f"kmeans_update={BUGS}:update_empty_cluster_zero"
    assert main(["bench", "--pipeline", "lloyd_iteration", "--step", CONTROL_ASSIGN, "--step", bad,
                 "--json", str(out)]) == 1
    assert "step kmeans_update has not passed the contract gates at float32" in capsys.readouterr().err
    data = json.loads(out.read_text())
    assert [v["passed"] for v in data["verifications"]] == [True, False] and data["shapes"] == []


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_triton_schedules_under_the_interpreter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's CPU path: the Triton assign baseline kernel and the stand-in update schedule, gated and
    checked over ten Lloyd iterations under the interpreter at the tiny shape; timing refused."""
    out = tmp_path / "lloyd.json"
    assert main(["bench", "--pipeline", "lloyd_iteration",
                 "--step", f"kmeans_assign={KMEANS / 'triton_assign.py'}:assign",
                 "--step", f"kmeans_update={KMEANS / 'update_onehot.cake'}@triton", "--json", str(out)]) == 2
    data = json.loads(out.read_text())
    assert all(v["passed"] for v in data["verifications"]) and data["shapes"][0]["check"]["ok"] is True


def test_sampled_check_inputs_keep_the_leading_batches() -> None:
    contract = get_contract("kmeans_assign")
    x, c = make_inputs(contract, {"B": 5, "N": 11, "K": 3, "D": 4}, torch.float32, "cpu", seed=0)
    sx, sc = sample_inputs(LLOYD, (x, c))
    assert sx.shape == (2, 11, 4) and sc.shape == (2, 3, 4) and torch.equal(sx, x[:2])


def _timing(baselines: list[tuple[str, Prepared]], unavailable: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    shape = Shape.of("tiny", "fp32", "", B=2, N=40, K=5, D=8)
    contract = get_contract("kmeans_assign")
    sets = [make_inputs(contract, shape.dim_map, torch.float32, "cpu", seed=i) for i in range(2)]
    kernels = {"kmeans_assign": fkb.torch_assign_mm, "kmeans_update": fkb.torch_update_index_add}
    return time_shape(LLOYD, shape, kernels, Verification(True, "battery", "test"), baselines, unavailable, sets,
                      Tick(), TimingConfig(warmup_calls=1, min_reps=3, max_reps=3), DEVICES["H200"])


def test_timing_glue_reports_per_iteration_times_and_the_speedup() -> None:
    torch_lloyd = LLOYD.baseline("torch").load()
    measurements, per_iteration, speedup = _timing([("torch", torch_lloyd)], [])
    assert [m.name for m in measurements] == [CANDIDATE, "torch"]
    # Every call costs half a scripted millisecond, and a call runs LLOYD.iterations iterations.
    per_call = 1.0  # scripted_clock.Tick: one millisecond per call
    assert per_iteration == {CANDIDATE: pytest.approx(per_call / LLOYD.iterations),
                             "torch": pytest.approx(per_call / LLOYD.iterations)}
    assert speedup.value == pytest.approx(1.0) and speedup.best_baseline == "torch"
    assert measurements[0].extra["ms_per_iteration"] == pytest.approx(per_call / LLOYD.iterations)
    assert measurements[0].times_ms == (per_call,) * 3


def test_a_missing_baseline_makes_the_speedup_undefined() -> None:
    torch_lloyd = LLOYD.baseline("torch").load()
    _, _, speedup = _timing([("torch", torch_lloyd)], [("flash_kmeans", "flash-kmeans is not installed")])
    assert speedup.value is None and speedup.undefined is not None and "flash_kmeans" in speedup.undefined


def test_a_baseline_failing_the_output_check_is_not_timed_and_the_speedup_is_undefined() -> None:
    nan_lloyd = Prepared(run=lambda x, c: torch.full_like(c, float("nan")))
    measurements, per_iteration, speedup = _timing([("nan_lloyd", nan_lloyd)], [])
    assert per_iteration["nan_lloyd"] is None and "non-finite centroids" in str(measurements[1].failure)
    assert speedup.value is None


def test_pipeline_baselines_load_or_say_why() -> None:
    ready, missing = load_baselines(LLOYD, None)
    names = [n for n, _ in ready] + [n for n, _ in missing]
    assert sorted(names) == sorted(b.name for b in LLOYD.baselines)
    if not torch.cuda.is_available():
        assert dict(missing)["flash_kmeans"]  # a reason, never a silent drop
    assert isinstance(LLOYD.baseline("torch"), Baseline)


def test_a_baseline_that_fails_to_load_is_an_internal_error_not_the_candidates() -> None:
    # Session 20 on the H200: Triton's @jit could not read triton_assign.py's source in a fresh bench worker, the
    # worker died and the candidate was recorded failed. A baseline's crash says nothing about the candidate.
    from dataclasses import replace

    from cake.errors import InternalError, is_internal

    def broken() -> Prepared:
        raise ValueError("@jit functions should be defined in a Python file")

    spec = replace(LLOYD, baselines=(Baseline("broken", "raises while loading", broken),))
    with pytest.raises(InternalError) as raised:
        load_baselines(spec, None)
    assert is_internal(str(raised.value)) and "loading baseline broken" in str(raised.value)
    assert "ValueError: @jit functions" in str(raised.value)


def test_a_bench_that_cannot_start_ends_the_verifier_worker_it_started_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    # bench_kernel spawns the verifier worker before its own setup (the starts overlap); here there is no GPU, the
    # setup refuses, and the spare is ended at once, not left running.
    from cake.experiments.workload import get_workload
    from cake.verifier import worker as worker_module
    from cake.verifier.worker_protocol import KernelRef

    from cake.evaluation.bench import BenchRequest, bench_kernel

    started: list[worker_module.Worker] = []
    real_init = worker_module.Worker.__init__

    def keep(self: worker_module.Worker, *a: object, **kw: object) -> None:
        real_init(self, *a, **kw)  # type: ignore[arg-type]
        started.append(self)

    monkeypatch.setattr(worker_module.Worker, "__init__", keep)
    shape = get_workload("flash_kmeans").op("kmeans_assign").shape("cake_cell")
    request = BenchRequest("kmeans_assign", KernelRef.parse(f"{KMEANS / 'controls.py'}:kmeans_assign"), (shape,))
    with pytest.raises(BenchSetupError, match="no CUDA device here"):
        bench_kernel(request)
    assert len(started) == 1 and started[0]._proc.poll() is not None
