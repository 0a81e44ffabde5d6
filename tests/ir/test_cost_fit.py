"""The fitter: per backend, held out by run (never a random split of one run), wins kept out of every fit."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cost_data
import fit_cost_model as fcm
import pytest
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors
from cake.ir.cost_calibrations import Calibration, store_calibration
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.bind_params import bind_params

from cake.runs.store import CandidateStatus, Evaluation, FitnessKind, NewCandidate, RunStore, ir_hash

PLAIN = (Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / "assign_plain.cake").read_text()
DIMS = {"B": 8, "N": 16384, "K": 1024, "D": 128}
TOOLCHAIN = "triton-3.6.0+torch-2.11.0"
CODEGEN = "8"
KEYED = f"{TOOLCHAIN}+codegen-{CODEGEN}+events"  # the fit keys the codegen version and the clock too
PLANTED = Factors(l2=4.0, cuda=4.0)  # what the "GPU" did, relative to the priors (it reorders RUN_B under priors)
# (BN 64 and 128: with BN 32 among them, once Triton's pipelined loads kept stages - 1 buffers, factors fitted on
# run B no longer ranked run A exactly)
RUN_A = [{"BN": bn, "BK": bk, "STAGES": 3, "WARPS": 4} for bn in (64, 128) for bk in (32, 64, 128)]
RUN_B = [{"BN": bn, "BK": bk, "STAGES": 2, "WARPS": 4} for bn in (64, 256) for bk in (32, 64, 128)]


def _text(params: dict[str, int]) -> str:
    return print_kernel(bind_params(parse(PLAIN), params))


def _measured_ms(text: str, dims: dict[str, int]) -> float:
    prior = predict(parse(text), dims=dims, dtype=DType.BF16, backend="triton", factors=Factors())
    return prior.retimed(PLANTED) * 1e3


def make_run(root: Path, assignments: Sequence[dict[str, int]], *, evolve: bool = False,
             device: str | None = "H200", dims: dict[str, int] | None = None, codegen: str | None = CODEGEN,
             slower: float = 1.0, anchor_ms: float | None = None) -> Path:
    """A run store of the Triton backend whose candidates were 'measured' at the planted factors, on a machine
    `slower` times slower than the planted one; with `anchor_ms`, each beside the anchor baseline at that time (also
    slowed), as an evolve's evaluation records it."""
    config: dict[str, Any] = {"workload": "flash_kmeans", "op": "kmeans_assign", "eval": {"backend": "triton"},
                              "dims": dims or DIMS, "dtype": "bf16", "toolchain": TOOLCHAIN}
    if device is not None:
        config["device"] = device
    if codegen is not None:
        config["codegen"] = codegen
    if evolve:
        config["loop"] = {"seed": 0}
    texts = [_text(p) for p in assignments]
    with RunStore.create(root, config) as store:
        ids = store.record_turn(1, [NewCandidate(ir_hash(t), t, "assign_plain", (), "test", str(p),
                                                 CandidateStatus.QUEUED) for t, p in zip(texts, assignments,
                                                                                         strict=True)], tokens=0)
        for cid, text in zip(ids, texts, strict=True):
            ms = _measured_ms(text, dims or DIMS) * slower
            timings = {} if anchor_ms is None else {f"{cost_data.ANCHOR_BASELINE}_ms": anchor_ms * slower}
            store.record_evaluation(cid, Evaluation(CandidateStatus.PASSED, None, (), timings, ms, 1.0, 1.0 / ms,
                                                    FitnessKind.MEASURED, None, "cuda:0", 1.0))
    return root


def test_times_are_read_as_ratios_to_the_baseline_their_process_timed_beside_them(tmp_path: Path) -> None:
    # The same schedules timed on a machine 5% slower: raw, the two runs disagree by 5%; read against the anchor
    # each process timed beside them, they agree, in milliseconds of the anchor's median.
    fast = make_run(tmp_path / "fast", RUN_A, anchor_ms=2.0)
    slow = make_run(tmp_path / "slow", RUN_A, anchor_ms=2.0, slower=1.05)
    raw = cost_data.load_sources([fast, slow], anchored=False).samples
    loaded = cost_data.load_sources([fast, slow])
    for group in (raw, loaded.samples):
        assert {s.ident for s in group if s.run == str(fast)} == {s.ident for s in group if s.run == str(slow)}
    ratio = {s.ident: s.measured_ms for s in raw if s.run == str(slow)}
    assert all(ratio[s.ident] == pytest.approx(1.05 * s.measured_ms) for s in raw if s.run == str(fast))
    by_ident: dict[str, set[float]] = {}
    for s in loaded.samples:
        by_ident.setdefault(s.ident, set()).add(round(s.measured_ms, 9))
        assert s.raw_ms is not None and s.anchor_ms is not None
        assert s.measured_ms == pytest.approx(s.raw_ms / s.anchor_ms * statistics.median([2.0, 2.1]))
    assert all(len(times) == 1 for times in by_ident.values())
    [(group, how)] = loaded.anchoring.items()
    assert how.anchored and how.samples == 2 * len(RUN_A) and how.level_ms == pytest.approx(2.05)
    assert fcm.fit_key(group[0], loaded.samples)["times"].endswith(f"{2 * len(RUN_A)} of {2 * len(RUN_A)}")


def test_repeatability_across_runs_is_read_raw_and_anchored(tmp_path: Path) -> None:
    import anchor_repeatability as ar

    fast = make_run(tmp_path / "fast", RUN_A, anchor_ms=2.0)
    slow = make_run(tmp_path / "slow", RUN_A, anchor_ms=2.0, slower=1.05)
    bare = make_run(tmp_path / "bare", RUN_A)  # no anchor in its process: its IRs are not compared
    found = ar.spreads(cost_data.load_sources([fast, slow], anchored=False).samples)
    assert found["raw"] == pytest.approx([1.05] * len(RUN_A)) and found["anchored"] == pytest.approx([1.0] * len(RUN_A))
    assert ar.spreads(cost_data.load_sources([fast, bare], anchored=False).samples) == {"raw": [], "anchored": []}
    assert ar.anchor_drift(cost_data.load_sources([fast, slow, bare], anchored=False).samples) == [1.0, 1.0]


def test_a_replayed_run_is_also_ranked_against_its_anchored_times() -> None:
    import rank_run_candidates as rrc

    # the GPU slowed 10% between two evaluations: raw, the later (faster) schedule looks slower; anchored, it is not
    rows = [rrc.Ranked("a", 1.00, 1.00, None, anchor_ms=1.0), rrc.Ranked("b", 1.05, 0.98, None, anchor_ms=1.1)]
    anchored = rrc.anchored(rows)
    assert [r.anchored_ms for r in anchored] == pytest.approx([1.05, 1.05 / 1.1 * 1.05])
    assert rrc.agreement(anchored, "in_run_ms")["spearman"] == pytest.approx(-1.0)
    assert rrc.agreement(anchored, "in_run_ms", "anchored_ms")["spearman"] == pytest.approx(1.0)
    assert all(r.anchored_ms is None for r in rrc.anchored([rows[0], rrc.Ranked("c", 1.0, 1.0, None)]))


def test_a_key_with_a_timing_that_has_no_baseline_beside_it_stays_raw(tmp_path: Path) -> None:
    anchored = make_run(tmp_path / "a", RUN_A, anchor_ms=2.0, slower=1.05)
    bare = make_run(tmp_path / "b", RUN_B)  # a variant run: no baseline in its process
    loaded = cost_data.load_sources([anchored, bare])
    assert all(s.raw_ms is None for s in loaded.samples)  # a ratio and a raw time are never ranked together
    [how] = loaded.anchoring.values()
    assert not how.anchored and how.why.startswith(f"raw: {len(RUN_B)} of {len(RUN_A) + len(RUN_B)} timings")
    assert fcm.fit_key(loaded.samples[0].key, loaded.samples)["times"] == "raw milliseconds"


def test_held_out_by_run_recovers_a_planted_calibration_on_two_fake_runs(tmp_path: Path) -> None:
    a, b = make_run(tmp_path / "a", RUN_A), make_run(tmp_path / "b", RUN_B + RUN_A[:1])  # one IR in both runs
    loaded = cost_data.load_sources([a, b])
    assert {s.key.backend for s in loaded.samples} == {"triton"} and not loaded.assumptions
    held = fcm.hold_out_by_run(loaded.samples)
    assert held is not None
    test_b = held.per_run[str(b)]
    assert test_b["fitted_on_runs"] == [str(a)] and test_b["fitted_on"] == len(RUN_A)
    assert test_b["tested"] == len(RUN_B) and test_b["dropped_seen_in_training"] == 1  # the shared IR
    assert held.per_run[str(a)]["fitted_on_runs"] == [str(b)]
    # Factors fitted on the other run rank each run as the planted model does.
    assert test_b["held_out"]["spearman"] == pytest.approx(1.0)
    assert held.per_run[str(a)]["held_out"]["spearman"] == pytest.approx(1.0)
    summary = fcm.fit_key(loaded.samples[0].key, loaded.samples)
    assert summary["held_out_by_run"]["pooled"]["n"] == len(RUN_A) + len(RUN_B) - 1
    assert test_b["prior"]["spearman"] < 0.8  # the priors misrank run B; factors fitted on run A alone fix it
    assert summary["held_out_by_run"]["pooled"]["spearman"] > summary["held_out_by_run"]["prior_pooled"]["spearman"]
    assert summary["worst_ranked"] and set(summary["worst_ranked"][0]["terms_ms"]) >= {"tensor", "cuda", "chain"}


def test_one_run_has_no_held_out_figure(tmp_path: Path) -> None:
    loaded = cost_data.load_sources([make_run(tmp_path / "a", RUN_A)])
    assert fcm.hold_out_by_run(loaded.samples) is None
    summary = fcm.fit_key(loaded.samples[0].key, loaded.samples)
    assert summary["held_out_by_run"] is None and "no held-out-by-run figure" in summary["held_out_note"]


def test_an_evolve_runs_reported_win_is_kept_out_of_every_fit(tmp_path: Path) -> None:
    a, b = make_run(tmp_path / "a", RUN_A, evolve=True), make_run(tmp_path / "b", RUN_B)
    loaded = cost_data.load_sources([a, b])
    [win] = [s for s in loaded.samples if s.win]
    assert win.run == str(a) and win.measured_ms == min(s.measured_ms for s in loaded.samples if s.run == str(a))
    held = fcm.hold_out_by_run(loaded.samples)
    assert held is not None
    assert held.per_run[str(b)]["fitted_on"] == len(RUN_A) - 1  # the win trained nothing
    assert held.per_run[str(a)]["tested"] == len(RUN_A)  # but it is ranked
    summary = fcm.fit_key(win.key, loaded.samples)
    assert [w["ident"] for w in summary["kept_out_of_every_fit"]] == [win.ident]
    cal = fcm.calibration_of(win.key, loaded.samples, summary, {})
    assert cal.fitted_on == len(RUN_A) + len(RUN_B) - 1
    assert cal.provenance["kept_out_of_every_fit"] == [f"{a}:{win.ident}"]


def test_a_run_without_device_needs_a_stated_assumption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "a", RUN_A, device=None)
    assert fcm.main([str(run)]) == 2
    assert "--assume-device" in capsys.readouterr().err
    out = tmp_path / "fit.json"
    assert fcm.main([str(run), str(make_run(tmp_path / "b", RUN_B)), "--assume-device", "H200",
                     "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["assumed"] == {str(run): "device H200 (command line)"}
    [key] = report["keys"]
    assert key["key"] == f"triton/H200/{KEYED}" and key["held_out_by_run"]["pooled"]["n"] == len(RUN_A) + len(RUN_B)


def test_a_run_without_a_codegen_version_needs_a_stated_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One IR lowers to different code across codegen versions: a run's timings belong to the version that lowered it.
    run = make_run(tmp_path / "a", RUN_A, codegen=None)
    assert fcm.main([str(run)]) == 2
    assert "--assume-codegen triton=VERSION" in capsys.readouterr().err
    loaded = cost_data.load_sources([run, make_run(tmp_path / "b", RUN_B, codegen="7")], codegens={"triton": "7"})
    assert {str(s.key) for s in loaded.samples} == {f"triton/H200/{TOOLCHAIN}+codegen-7+events"}  # one key: both 7
    assert loaded.assumptions == {str(run): "codegen 7 (command line)"}


def test_runs_at_different_codegen_versions_are_fitted_apart(tmp_path: Path) -> None:
    loaded = cost_data.load_sources([make_run(tmp_path / "a", RUN_A, codegen="1"), make_run(tmp_path / "b", RUN_B)])
    assert {str(s.key) for s in loaded.samples} == {f"triton/H200/{TOOLCHAIN}+codegen-1+events",
                                                    f"triton/H200/{KEYED}"}


def _variant_run(costdata: Path, assignments: Sequence[dict[str, int]], reps: Sequence[Sequence[float]]) -> Path:
    """A `runs/triton-0` beside a `gpu_time_variants.json` that holds each candidate's timed reps."""
    run = make_run(costdata / "runs" / "triton-0", assignments)
    outcomes = [{"backend": "triton", "run": 0, "ir_hash": ir_hash(_text(p)), "verdict": "timed", "times_ms": list(t)}
                for p, t in zip(assignments, reps, strict=True)]
    (costdata / "gpu_time_variants.json").write_text(json.dumps({"outcomes": outcomes}))
    return run


def test_the_quality_rule_drops_timings_whose_reps_are_unsteady(tmp_path: Path) -> None:
    steady, host_bound = [1.00, 1.01, 1.02, 1.01, 1.03], [0.80, 1.00, 1.05, 0.98, 1.20]  # median/min 1.01 vs 1.25
    run = _variant_run(tmp_path / "costdata", RUN_A[:3], [steady, host_bound, steady])
    evolve = make_run(tmp_path / "evolve", RUN_B, evolve=True)  # no reps stored: not judged
    loaded = cost_data.load_sources([run, evolve])
    assert len([s for s in loaded.samples if s.run == str(run)]) == 2
    [drop] = loaded.unsteady
    assert drop["ident"] == ir_hash(_text(RUN_A[1])) and "1.1 x fastest rep 0.800 ms" in drop["why"]
    assert loaded.not_judged == {str(evolve): len(RUN_B)}
    assert cost_data.unsteady(steady) is None and cost_data.unsteady([5.0]) is None


def test_an_evolve_runs_bench_reps_are_judged_and_rank_themselves(tmp_path: Path) -> None:
    steady, host_bound = [1.00, 1.01, 1.02, 1.01, 1.03], [0.80, 1.00, 1.05, 0.98, 1.20]
    evolve = make_run(tmp_path / "evolve", RUN_B[:3], evolve=True)
    hashes = [ir_hash(_text(p)) for p in RUN_B[:3]]
    for h, times in zip(hashes, [steady, host_bound, [2 * t for t in steady]], strict=True):
        measurement = {"name": "candidate", "candidate": True, "times_ms": times}
        (evolve / "candidates" / f"{h}.bench.json").write_text(json.dumps({"shapes": [{"measurements": [
            measurement, {"name": "triton_assign", "candidate": False, "times_ms": [9.0] * len(times)}]}]}))
    loaded = cost_data.load_sources([evolve])
    [drop] = loaded.unsteady
    assert drop["ident"] == hashes[1] and not loaded.not_judged
    [(name, ceiling)] = fcm.timing_ceiling([evolve]).items()
    assert name.startswith("evolve runs (1,") and ceiling["n"] == 3


# What the committed data gives (session 6: warp issue and the CUDA backend's serial loads in the chain, a free
# level in the fit): held-out-by-run figures within one timing shape, as (n, rho at least, top-5 recall at least).
# Session 5 reported 0.555 / 0.2 (CUDA) and 0.689 / 0.2 (Triton) at the same shape; session 7 added two runs of 12
# (the WARPS 4 vs 8 test): 107 -> 125 held out by run; session 8 priced the CUDA backend's lazy vector loads: rho
# 0.762 -> 0.776 (CUDA 125, top-5 0.2; Triton 171, rho 0.728, top-5 0.4, fitted with the bench run).
# Session 11: the measurement-quality rule drops 39 timings whose median rep is > 1.10 x their fastest (20 CUDA: 18
# of the 23 ping-pongs, 2 assign_plain_norms; 19 Triton: 17 assign_plain_norms, 2 assign_plain), warps5's run of 7
# is read, and keys hold the
# codegen version and the clock, so the Triton bench (codegen 1 or 2) no longer trains the codegen-3 runs.
# Session 11 (cost12): 176 CUDA codegen-4 variants timed kernel-only (CUDA graph), priced with codegen 4's own
# constants (its row-per-lane ||c||^2 sum from SASS, 4 tile-load vectors in flight, 16-slot lazy loads; wgmma
# operands read per instruction): held out by run 0.743 -> 0.813, top-5 0.2 -> 0.2 (its priors: 0.743 / 0.8 ->
# 0.769 / 0.2); codegen 1 (nvcc 13.0.88) 0.785 -> 0.782 (the wgmma re-reads), Triton unchanged.
# Session 21 added the s20-s21 evolve seeds to the codegen-4 events key (61 held out). Session 22 judges the factors
# plus a learned correction (cake.ir.cost_correction; factors alone in the comment): codegen 1 0.766 -> 0.868, graph
# 0.864 -> 0.919 (top-5 0.8: the issue-17 goal is met there), events 0.713 -> 0.737, Triton 0.739 -> 0.838.
# Session 25 prices a spill ptxas reports as its bytes through L1 or L2 (cake.ir.cost_pressure) and adds seeds 12-13:
# events 76 held out, 0.702 / 0.2 -> 0.849 / 0.6.
# Session 26 combines tensor and shared-memory time as their Euclidean norm (tensor_smem_norm): events 0.849 / 0.6 ->
# 0.905 / 0.8 (the goal met), graph 0.919 / 0.8 -> 0.910 / 0.6, codegen 1 0.868 / 0.2 -> 0.865 / 0.4, Triton 0.838 -> 0.837.
# Session 33 (these figures had gone stale: the test is slow, and CI does not run it): session 28's H200 evolve
# seeds 15-16 took the events key to 109 held out (0.939 / 0.8); graph 0.909 / 0.8; the H100 evolve key is
# 0.846 / 0.2 over 142; Triton codegen 3 0.855 / 0.6 (Triton's stages - 1 buffers, session 32).
# (key: shape, held-out n, rho at least, top-5 at least, issue-17 goal met)
REPORTED = {
    "cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-1+events": ("B=8,D=128,K=1024,N=16384 bf16", 107, 0.86, 0.4, False),
    "cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-4+graph": ("B=8,D=128,K=1024,N=16384 bf16", 176, 0.90, 0.8, True),
    # the kmeans evolve runs at codegen 4 (through session 34), priced with the spills ptxas reports for their code
    # (session 19), their times anchored to the triton_assign timed beside each
    "cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-4+events": ("B=32,D=128,K=1024,N=65536 bf16", 132, 0.95, 0.8, True),
    # the H100 evolve runs (sessions 27-33), anchored too: the goal is not met there
    "cuda/H100-SXM5/nvcc-13.0.88+torch-2.11.0+codegen-4+events": ("B=32,D=128,K=1024,N=65536 bf16", 142, 0.85, 0.2,
                                                                  False),
    "triton/H200/triton-3.6.0+torch-2.11.0+codegen-3+events": ("B=8,D=128,K=1024,N=16384 bf16", 152, 0.85, 0.6, False),
}


@pytest.mark.slow  # ~3 min on two shared cores: every committed candidate is re-predicted and fitted
def test_the_fitter_on_the_committed_runs_reports_what_results_md_says(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "fit.json"
    assert fcm.main(["--out", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "kept out of every fit (reported win)" in out and "worst ranked" in out
    report = json.loads(out_json.read_text())
    keys = {k["key"]: k for k in report["keys"]}
    for key, (shape, n, rho, top5, goal_met) in REPORTED.items():
        by_shape = keys[key]["held_out_by_run"]["by_shape"][shape]
        group = by_shape["held_out"]
        assert group["n"] == n and group["spearman"] >= rho and group["top5_recall"] >= top5, (key, group)
        assert keys[key]["held_out_by_run"]["goal_met"] == goal_met, key
        # the correction never ranks held-out runs worse than the factors alone
        assert group["spearman"] >= by_shape["analytic"]["spearman"], (key, by_shape)
    anchored = {k for k, summary in keys.items() if summary["times"].startswith("anchored")}
    assert anchored == {"cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-4+events",
                        "cuda/H100-SXM5/nvcc-13.0.88+torch-2.11.0+codegen-4+events"}  # every timing beside its anchor
    # The measurements rank themselves (split-half reps) far better than the model does: the model is the limit.
    ceiling = report["measurement_ceiling"]
    assert min(fig["spearman"] for fig in ceiling.values()) > 0.95


def test_held_out_figures_are_judged_within_one_timing_shape(tmp_path: Path) -> None:
    small = {"B": 2, "N": 4096, "K": 256, "D": 128}
    a, b = make_run(tmp_path / "a", RUN_A), make_run(tmp_path / "b", RUN_B)
    c = make_run(tmp_path / "c", [{"BN": 128, "BK": bk, "STAGES": 4, "WARPS": 4} for bk in (32, 64, 128)], dims=small)
    loaded = cost_data.load_sources([a, b, c])
    summary = fcm.fit_key(loaded.samples[0].key, loaded.samples)
    shapes = summary["held_out_by_run"]["by_shape"]
    assert {g["held_out"]["n"] for g in shapes.values()} == {len(RUN_A) + len(RUN_B), 3}
    assert sorted(len(g["runs"]) for g in shapes.values()) == [1, 2]
    assert summary["held_out_by_run"]["pooled"]["n"] == len(RUN_A) + len(RUN_B) + 3
    assert not summary["held_out_by_run"]["goal_met"]  # n < 50 at every shape


def test_a_fit_is_stored_only_when_it_ranks_held_out_runs_at_least_as_well_as_the_priors() -> None:
    def summary(fitted: float, prior: float) -> dict[str, Any]:
        return {"held_out_by_run": {"pooled": {"spearman": fitted}, "prior_pooled": {"spearman": prior}}}

    def shapes(*pairs: tuple[float, float]) -> dict[str, Any]:
        groups = {f"shape{i}": {"held_out": {"spearman": f}, "prior": {"spearman": p}} for i, (f, p) in enumerate(pairs)}
        return {"held_out_by_run": {"pooled": {"spearman": 0.99}, "prior_pooled": {"spearman": 0.0},
                                    "by_shape": groups}}

    assert fcm.keep_decision(summary(0.9, 0.8), False)[0]
    keep, why = fcm.keep_decision(summary(-0.3, 0.03), False)
    assert not keep and "rank unseen runs worse" in why
    assert fcm.keep_decision(shapes((0.9, 0.8), (0.7, 0.6)), False)[0]
    keep, why = fcm.keep_decision(shapes((0.9, 0.8), (0.68, 0.70)), False)  # a better pool does not hide it
    assert not keep and "(shape1)" in why
    assert not fcm.keep_decision({"held_out_by_run": None}, False)[0]
    assert fcm.keep_decision({"held_out_by_run": None}, True)[0]


def test_retracted_timings_are_read_per_run(tmp_path: Path) -> None:
    # One IR hash is timed on both backends; a retraction names the run whose kernel was wrong, not the IR.
    costdata = tmp_path / "costdata"
    for run in ("cuda-0", "triton-0"):
        (costdata / "runs" / run).mkdir(parents=True)
    (costdata / "retracted.json").write_text(json.dumps({"why": "half the rows", "runs": {"cuda-0": {"abc": "x"}}}))
    assert cost_data.retracted_timings(costdata / "runs" / "cuda-0") == {"abc"}
    assert cost_data.retracted_timings(costdata / "runs" / "triton-0") == frozenset()
    assert cost_data.retracted_timings(tmp_path / "elsewhere" / "runs" / "cuda-0") == frozenset()


def test_a_stored_calibration_that_ranks_worse_than_the_priors_is_stale(tmp_path: Path) -> None:
    # Factors fitted for an earlier model can rank the same runs worse than the current priors; --write then
    # removes them instead of leaving them to price every later search.
    loaded = cost_data.load_sources([make_run(tmp_path / "a", RUN_A), make_run(tmp_path / "b", RUN_B)])
    key = loaded.samples[0].key
    directory = tmp_path / "calibrations"
    assert fcm.stale_stored(key, loaded.samples, directory) == (None, "no stored calibration")
    store_calibration(Calibration(key, PLANTED, 1, "2026-12-02", {}, ()), directory)
    assert fcm.stale_stored(key, loaded.samples, directory)[0] is None  # the planted factors rank them exactly
    store_calibration(Calibration(key, Factors(smem=16.0), 1, "2026-12-02", {}, ()), directory)  # rho 0.60 < 0.74
    path, why = fcm.stale_stored(key, loaded.samples, directory)
    assert path == directory / key.file_name and "fitted for an earlier model" in why
    # A correction over another model's features cannot be read: stale too. Another key's such file, one this
    # `--write` has not refitted yet, is not read at all.
    old_features = json.loads(path.read_text())
    old_features["correction"] = {"features": ["log_time"], "means": [0.0], "scales": [1.0], "weights": [0.0],
                                  "intercept": 0.0, "regularization": 0.1, "blend": 0.5}
    other = directory / "triton__H100-SXM5__other.json"
    other.write_text(json.dumps(old_features))
    store_calibration(Calibration(key, PLANTED, 1, "2026-12-02", {}, ()), directory)
    assert fcm.stale_stored(key, loaded.samples, directory)[0] is None
    path.write_text(json.dumps(old_features))
    path, why = fcm.stale_stored(key, loaded.samples, directory)
    assert path == directory / key.file_name and "cannot read" in why and "features" in why


def test_a_calibration_fitted_on_some_runs_ranks_a_key_it_never_saw(tmp_path: Path) -> None:
    # cost_transfer: fitted on two runs of the planted calibration, a third run (another shape) is ranked by the
    # factors alone and by factors plus correction, each figure per timing shape of the ranked runs.
    import cost_transfer

    small = {"B": 2, "N": 4096, "K": 256, "D": 128}
    source = cost_data.load_sources([make_run(tmp_path / "a", RUN_A), make_run(tmp_path / "b", RUN_B)]).samples
    target = cost_data.load_sources([make_run(tmp_path / "c", RUN_A + RUN_B, dims=small)]).samples
    out = cost_transfer.transfer(source, target)
    (tag, rows), = out.items()
    assert "N=4096" in tag and set(rows) == {"prior", "factors", "factors+correction"}
    assert rows["factors"]["n"] == len(RUN_A) + len(RUN_B)
    assert rows["factors"]["spearman"] > rows["prior"]["spearman"]  # the planted l2 factor transfers
    assert rows["factors+correction"]["spearman"] is not None


def test_the_held_out_rho_carries_an_interval_over_its_test_runs() -> None:
    from types import SimpleNamespace

    def sample(run: str, ms: float) -> Any:
        return SimpleNamespace(run=run, measured_ms=ms)

    # one run ranked perfectly, one backwards: the pooled rho sits between what each run alone would say
    samples = [sample("a", m) for m in (1.0, 2.0, 3.0)] + [sample("b", m) for m in (4.0, 5.0, 6.0)]
    predicted = [1.0, 2.0, 3.0, 6.0, 5.0, 4.0]
    interval = fcm.rho_over_runs(samples, predicted)
    assert interval is not None and interval["low"] < interval["point"] < interval["high"]
    assert interval["high"] == 1.0  # a draw of run a alone
    assert fcm.rho_over_runs(samples[:3], predicted[:3]) is None  # one run: no interval


def test_a_variant_report_that_records_its_provenance_is_one_run_of_its_key(tmp_path: Path) -> None:
    folder = tmp_path / "vs"
    folder.mkdir()
    texts = {name: (Path(__file__).resolve().parents[2] / "experiments" / "kmeans" / name).read_text()
             for name in ("assign_pingpong.cake", "assign_pingpong_rs.cake")}
    for name, text in texts.items():
        (folder / f"{name[:-5]}____abc.cake").write_text(text)
    provenance = {"device": "NVIDIA H200", "toolchain": "nvcc-13.0.88+torch-2.11.0", "codegen": "1", "clock": "events",
                  "dims": {"B": 32, "N": 65536, "K": 1024, "D": 128}, "dtype": "bf16"}
    rows = [{"file": "assign_pingpong____abc.cake", "status": "timed", "ms": ms,
             "baseline_ms": {cost_data.ANCHOR_BASELINE: anchor}} for ms, anchor in ((1.2, 1.3), (1.1, 1.2), (1.3, 1.4))]
    rows += [{"file": "assign_pingpong_rs____abc.cake", "status": "timed", "ms": 1.05,
              "baseline_ms": {cost_data.ANCHOR_BASELINE: 1.3}},
             {"file": "assign_pingpong_rs____abc.cake", "status": "bfloat16: failed: CMP-01 (FAIL)", "ms": None},
             {"status": "timed", "ms": 0.5}]  # a row of a report written before rows named their file: not read
    report = folder / cost_data.VARIANT_REPORT
    report.write_text(json.dumps({"provenance": provenance, "rows": rows}))
    loaded = cost_data.load_sources([report], anchored=False)
    assert sorted((s.label, s.measured_ms, s.anchor_ms) for s in loaded.samples) == [
        ("assign_pingpong____abc", 1.2, 1.3), ("assign_pingpong_rs____abc", 1.05, 1.3)]  # the median of its rounds
    anchored = cost_data.load_sources([report]).samples  # every row timed the anchor: read against it, at its median
    assert sorted((s.label, s.raw_ms) for s in anchored) == [("assign_pingpong____abc", 1.2),
                                                             ("assign_pingpong_rs____abc", 1.05)]
    assert all(s.measured_ms == pytest.approx(s.raw_ms / s.anchor_ms * 1.3) for s in anchored if s.raw_ms)
    assert {str(s.key) for s in loaded.samples} == {"cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-1+events"}
    assert {s.run for s in loaded.samples} == {str(folder)} and not any(s.win for s in loaded.samples)
    report.write_text(json.dumps({"rows": rows}))  # what every report before session 26 is
    with pytest.raises(cost_data.SourceError, match="records no provenance"):
        cost_data.load_sources([report])
    # the default sources take only the committed reports that record it
    assert all("provenance" in json.loads(p.read_text()) for p in cost_data.recorded_variant_reports())


def test_the_hand_written_kernels_a_win_is_judged_against_are_kept_out_of_every_fit(tmp_path: Path) -> None:
    from cake.experiments.kmeans.workload import FOLDER
    from cake.experiments.schedules import write_specialized

    folder = tmp_path / "vs"
    folder.mkdir()
    reference = write_specialized(FOLDER / "assign_pingpong.cake", {}, folder)  # as the comparison writes it
    other = write_specialized(FOLDER / "assign_pingpong.cake", {"STAGES": 3}, folder)  # a param variant is not it
    provenance = {"device": "NVIDIA H200", "toolchain": "nvcc-13.0.88+torch-2.11.0", "codegen": "4", "clock": "events",
                  "dims": {"B": 32, "N": 65536, "K": 1024, "D": 128}, "dtype": "bf16"}
    rows = [{"file": reference.name, "status": "timed", "ms": 1.15}, {"file": other.name, "status": "timed", "ms": 1.2}]
    report = folder / cost_data.VARIANT_REPORT
    report.write_text(json.dumps({"provenance": provenance, "rows": rows}))
    loaded = cost_data.load_sources([report, make_run(tmp_path / "a", RUN_A)])
    kept = [s for s in loaded.samples if s.kept_out]
    assert [(s.label, s.reference, s.win) for s in kept] == [(reference.stem, True, False)]
    assert set(cost_data.REFERENCE_SCHEDULES) >= {"assign_pingpong.cake"}
    summary = fcm.fit_key(kept[0].key, [s for s in loaded.samples if s.key == kept[0].key])
    assert [(w["label"], w["why"]) for w in summary["kept_out_of_every_fit"]] == [(reference.stem, "reference")]


def test_a_triton_key_priced_without_its_compiler_is_never_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Code the Triton backend generates today is priced with what the Triton that timed it allocates, compiled
    here. Where that cannot happen (this process interprets Triton, or another Triton version is installed) its
    static estimate is fitted, and that fit must not replace a stored one fitted on compiled allocations."""
    from cake.lowering.backend import get_backend

    current = str(get_backend("triton").codegen_version)
    runs = [make_run(tmp_path / "a", RUN_A, codegen=current), make_run(tmp_path / "b", RUN_B, codegen=current)]
    loaded = cost_data.load_sources(runs)
    (key,) = {s.key for s in loaded.samples}
    # (Triton 3.6 timed it; this process interprets Triton, and may hold another version)
    assert set(loaded.uncompiled) == {key} and loaded.uncompiled[key].endswith("here: static estimate")
    assert cost_data.load_sources([make_run(tmp_path / "old", RUN_A)]).uncompiled == {}  # codegen 8: never compiled
    stored: list[object] = []
    monkeypatch.setattr(fcm, "store_calibration", stored.append)
    assert fcm.main(["--write", *map(str, runs)]) == 0
    assert stored == [] and "NOT STORED: its code was priced with the static estimate" in capsys.readouterr().out
