"""A GPU evaluation gates every dtype its schedule declares inside the bench worker, before timing: the evaluator
used to start a second verifier worker after the timing for the dtypes it does not time (one more process start,
~5 s of an evaluation's ~31 s on the H200). The evaluator reads each dtype's verdict from the cache the bench
filled, and a failure (or a missing verdict) in any of them fails the candidate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cake.verifier.results import GateResult, GateStatus, Verdict

from cake.evaluation import evaluator as ev
from cake.evaluation.bench import BenchRequest, BenchTimes, verdict_verification
from cake.evaluation.evaluator import BENCH_SECONDS_PER_EXTRA_DTYPE, EvalSettings, ScheduleEvaluator
from cake.evaluation.protocol import EvalJob
from cake.runs.store import CandidateStatus

REPO = Path(__file__).resolve().parents[2]
SHAPE = "cake_cell"
PASS = Verdict.of("kmeans_assign", (GateResult("CMP-01", GateStatus.PASS, "ok"),))
FAIL = Verdict.of("kmeans_assign", (GateResult("CMP-01", GateStatus.FAIL, "wrong ids", replay_token="cake1:t"),))


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdicts: dict[str, Verdict | None],
         outcome: BenchTimes | None = None):
    seen: dict[str, object] = {}

    def worker(request: BenchRequest, device: str, *, timeout_s: float, reuse: bool = False,
               **_: object) -> tuple[BenchTimes, str]:
        seen.update(gated=request.verified_dtypes, timeout_s=timeout_s, retire_ratio=request.retire_ratio,
                    reuse=reuse)
        return outcome or BenchTimes({SHAPE: 1.0}, {"triton_assign": {SHAPE: 1.2}}), ""

    def no_second_worker(*_: object, **__: object) -> None:
        raise AssertionError("the evaluator started a verifier worker of its own")

    monkeypatch.setattr(ev, "run_bench_worker", worker)
    monkeypatch.setattr(ScheduleEvaluator, "verify", no_second_worker)
    monkeypatch.setattr(ScheduleEvaluator, "cached_verdict", lambda self, path, dtype, device="cuda": verdicts[dtype])
    path = tmp_path / "abc.cake"
    shutil.copy(REPO / "experiments/kmeans/assign_plain.cake", path)
    evaluator = ScheduleEvaluator(op="kmeans_assign", workload="flash_kmeans", arch="sm_90a",
                                  settings=EvalSettings(device="cuda", backend="cuda", seed=0),
                                  against=("triton_assign",))
    return evaluator, evaluator.evaluate(EvalJob(1, "abc", path, None), "cuda"), seen


def test_every_declared_dtype_is_gated_in_the_bench_and_a_pass_in_each_scores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evaluator, evaluation, seen = _run(tmp_path, monkeypatch, {"bfloat16": PASS, "float16": PASS})
    # The CUDA backend serves a `via dot` schedule's f16 and bf16, not its f32; the fitness dtype first.
    assert seen["gated"] == ("bfloat16", "float16")
    assert seen["timeout_s"] == evaluator.bench_timeout_s + BENCH_SECONDS_PER_EXTRA_DTYPE
    assert seen["retire_ratio"] == ev.BASELINE_RETIRE_RATIO  # the fitness needs only the baselines that could be best
    assert seen["reuse"] is True  # an evaluation runs on the device's bench server by default
    assert evaluation.status is CandidateStatus.PASSED and evaluation.fitness == pytest.approx(1.2)


@pytest.mark.parametrize("verdict, said", [(FAIL, "fails in float16: failed (passed bfloat16)"),
                                           (None, "fails in float16: no verdict")])
def test_a_failure_or_no_verdict_in_another_dtype_fails_the_candidate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdict: Verdict | None, said: str) -> None:
    _, evaluation, _ = _run(tmp_path, monkeypatch, {"bfloat16": PASS, "float16": verdict})
    assert evaluation.status is CandidateStatus.FAILED and evaluation.fitness is None
    assert said in (evaluation.error or "")
    assert evaluation.replay_tokens == (("cake1:t",) if verdict is FAIL else ())


def test_a_refusal_no_cache_keeps_is_stored_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 28's H200 seed 15 stored four failures as `bench: ` and nothing else: a RUNTIME_ERROR verdict (here
    ptxas refusing a wgmma at the consumer's register budget, met at the first call) is machine-dependent, so no
    cache keeps it, and the evaluator read why from the cache only."""
    crash = Verdict.of("kmeans_assign", (GateResult("RES-01", GateStatus.RUNTIME_ERROR,
                                                    "CompileError: C0900: ptxas rejected the generated code: (C7602) "
                                                    "Insufficient registers (64)"),))
    refusal = BenchTimes(refused=f"bfloat16: {verdict_verification(crash).detail}")
    _, evaluation, _ = _run(tmp_path, monkeypatch, {"bfloat16": None, "float16": None}, refusal)
    assert evaluation.status is CandidateStatus.FAILED
    assert "refused by the gates: bfloat16: failed: RES-01 (RUNTIME_ERROR); RES-01: CompileError: C0900" in (
        evaluation.error or "")


def test_the_request_crosses_the_process_boundary_with_its_gate_dtypes_and_retire_ratio() -> None:
    from cake.experiments.workload import get_workload
    from cake.verifier.worker_protocol import KernelRef

    from cake.evaluation.bench import request_from_json, request_to_json

    shape = get_workload("flash_kmeans").op("kmeans_assign").shape(SHAPE)
    ref = KernelRef.parse(f"{REPO / 'experiments/kmeans/controls.py'}:kmeans_assign")
    request = BenchRequest("kmeans_assign", ref, (shape,), ("triton_assign",),
                           gate_dtypes=("float16",), retire_ratio=3.0)
    again = request_from_json(json.loads(json.dumps(request_to_json(request))))
    assert again == request and again.verified_dtypes == ("bfloat16", "float16") and again.retire_ratio == 3.0
