"""Fit and validate the cost model's calibration on a committed GPU run (no GPU needed).

    python3 scripts/fit_cost_model.py                       # the first H200 run
    python3 scripts/fit_cost_model.py --no-write            # figures only
    python3 scripts/fit_cost_model.py --targets RUN_DIR/calibration_targets.jsonl ...

Reads `results/<run>/bench_cost_model.json` (written by `bench_cost_model.py` on the GPU), re-predicts
every timed schedule with the *current* model at the CAKE cell, and reports Spearman rho and top-k recall:

- prior: the model with every factor 1.0;
- in-sample: factors fitted on all timed schedules (`cake.ir.cost_calibration.fit_factors`);
- k-fold: factors fitted on k-1 folds, each held-out fold ranked with factors that never saw it; the figures
  are the mean over folds of the per-fold rho, and rho / top-k over the pooled held-out predictions.

`--targets` adds the distiller's mispredictions (`cake.ir.cost_calibration.load_calibration_targets`; records
for another device or toolchain are skipped and counted by reason) to the fit. They join the in-sample fit
and *every training fold* of the k-fold, but never a test fold: folds partition the committed run only, so the
held-out figures stay those of the committed data, ranked by factors that also saw the targets. The targets'
own prior / fitted figures are reported separately under "targets".

Writes the in-sample calibration into `ir/data/cost_calibration.json` for (device, toolchain) and a summary
to `results/<run>/cost_fit.json`. Fits that end at a bound are reported, never silently kept.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

from cake.experiments.kmeans import shapes
from cake.ir.cost import predict
from cake.ir.cost_calibration import (
    DATA_PATH,
    Calibration,
    Factors,
    Fit,
    LoadedTargets,
    MeasuredSample,
    fit_factors,
    load_calibration_targets,
    spearman,
    store_calibration,
    top_k_recall,
)
from cake.ir.nodes import DType
from cake.ir.parser import parse

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results" / "h200-2026-11-30"
SCHEDULES = ROOT / "experiments" / "kmeans"
DEVICE_NAMES = {"NVIDIA H200": "H200"}
TOP_K = (5, 10)


Sample: TypeAlias = MeasuredSample  # the fit's sample type lives in cake.ir so that calibration targets load into it


def load_samples(run: Path) -> tuple[dict[str, Any], list[Sample]]:
    """The run's report and its timed entries, re-predicted with the current model and prior factors."""
    report = json.loads((run / "bench_cost_model.json").read_text())
    kernels: dict[str, Any] = {}
    samples = []
    for entry in report["entries"]:
        if entry.get("status") != "timed" or entry.get("measured_ms") is None:
            continue
        name = entry["schedule"]
        if name not in kernels:
            kernels[name] = parse((SCHEDULES / name).read_text(), name)
        p = predict(kernels[name], dims=shapes.CAKE_CELL.dim_map, dtype=DType.BF16, params=entry["params"],
                    device=DEVICE_NAMES.get(report["device"], report["device"]), factors=Factors())
        samples.append(Sample(name, dict(entry["params"]), float(entry["measured_ms"]), p))
    return report, samples


def fit_on(samples: Sequence[Sample]) -> Fit:
    preds = [s.prediction for s in samples]
    return fit_factors(lambda f: [p.retimed(f) for p in preds], [s.measured_ms * 1e-3 for s in samples])


def figures(predicted: Sequence[float], measured: Sequence[float]) -> dict[str, float]:
    out = {"spearman": spearman(predicted, measured)}
    for k in TOP_K:
        out[f"top{k}_recall"] = top_k_recall(predicted, measured, k)
    return out


def folds(n: int, k: int, seed: int) -> list[list[int]]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::k]) for i in range(k)]


def cross_validate(samples: Sequence[Sample], k: int, seed: int, extra: Sequence[Sample] = ()) -> dict[str, Any]:
    """Fit on k-1 folds (plus every `extra` sample), rank the held-out fold; the held-out fold never informs
    its own factors, and `extra` samples are never in a test fold."""
    measured = [s.measured_ms for s in samples]
    pooled = [0.0] * len(samples)
    per_fold = []
    bound_hits: list[list[str]] = []
    for test in folds(len(samples), k, seed):
        held = set(test)
        fit = fit_on([*(s for i, s in enumerate(samples) if i not in held), *extra])
        bound_hits.append(list(fit.at_bound))
        for i in test:
            pooled[i] = samples[i].prediction.retimed(fit.factors)
        per_fold.append(spearman([pooled[i] for i in test], [measured[i] for i in test]))
    return {"k": k, "seed": seed, "spearman_per_fold": per_fold,
            "spearman_mean_of_folds": sum(per_fold) / len(per_fold),
            "pooled_held_out": figures(pooled, measured), "at_bound_per_fold": bound_hits}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=RUN)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print the figures; write nothing")
    parser.add_argument("--targets", type=Path, nargs="+", default=[], metavar="JSONL",
                        help="RUN_DIR/calibration_targets.jsonl files (the distiller's) to add to the fit")
    parser.add_argument("--accept-unrecorded-toolchain", action="store_true",
                        help="use target records that name no toolchain as if measured with the run's")
    args = parser.parse_args(argv)
    report, samples = load_samples(args.run)
    device = DEVICE_NAMES.get(report["device"], report["device"])
    targets = load_calibration_targets(args.targets, device=device, toolchain=report["toolchain"],
                                       unrecorded_toolchain_ok=args.accept_unrecorded_toolchain)
    extra = list(targets.samples)
    measured = [s.measured_ms for s in samples]
    prior = [s.prediction.time_s for s in samples]
    fit = fit_on([*samples, *extra])
    fitted = [s.prediction.retimed(fit.factors) for s in samples]
    cv = cross_validate(samples, args.folds, args.seed, extra)
    summary: dict[str, Any] = {
        "run": args.run.name, "device": report["device"], "toolchain": report["toolchain"], "timed": len(samples),
        "as_recorded_by_the_run": {k: report.get(k) for k in ("spearman_prior", "spearman_calibrated_in_sample",
                                                                 "spearman_calibrated_2fold", "top5_recall_prior",
                                                                 "top10_recall_prior", "factors")},
        "prior": figures(prior, measured), "in_sample": figures(fitted, measured),
        "cross_validation": cv, "factors": fit.factors.to_json(), "at_bound": list(fit.at_bound),
        "inert": list(fit.inert), "bounds": list(fit.bounds), "regularization": fit.regularization,
        "rms_log_error_in_sample": fit.rms_log_error,
        "predictions": [{"params": s.params, "measured_ms": s.measured_ms, "prior_ms": p * 1e3,
                         "fitted_ms": q * 1e3, "bound": s.prediction.bound.name}
                        for s, p, q in zip(samples, prior, fitted, strict=True)],
    }
    if args.targets:
        summary["targets"] = target_summary(targets, fit, [str(p) for p in args.targets])
        print_targets(summary["targets"])
    print_table(samples, prior, fitted, summary)
    if fit.warning():
        print(f"WARNING: {fit.warning()}", file=sys.stderr)
    if not args.no_write:
        cal = Calibration(device, report["toolchain"], fit.factors, len(samples) + len(extra),
                          summary["prior"]["spearman"],
                          summary["in_sample"]["spearman"], "2026-11-30",
                          f"fitted by scripts/fit_cost_model.py on {args.run.name}; {args.folds}-fold held-out "
                          f"rho {cv['pooled_held_out']['spearman']:.3f} (pooled)"
                          + (f"; plus {len(extra)} calibration targets in every training fold" if extra else ""),
                          fit.at_bound)
        store_calibration(cal, DATA_PATH)
        (args.run / "cost_fit.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def target_summary(targets: LoadedTargets, fit: Fit, files: Sequence[str]) -> dict[str, Any]:
    """What the targets were and how the fit treats them (in-sample for them: they trained it)."""
    out: dict[str, Any] = {"files": list(files), "used": len(targets.samples), "skipped": len(targets.skipped),
                           "skipped_by_reason": targets.skip_counts(),
                           "skipped_records": [{"source": s.source, "candidate_id": s.candidate_id,
                                                "reason": s.reason} for s in targets.skipped]}
    if len(targets.samples) >= 2:
        measured = [s.measured_ms for s in targets.samples]
        out["prior"] = figures([s.prediction.time_s for s in targets.samples], measured)
        out["in_sample"] = figures([s.prediction.retimed(fit.factors) for s in targets.samples], measured)
    return out


def print_targets(summary: dict[str, Any]) -> None:
    reasons = ", ".join(f"{k} {v}" for k, v in summary["skipped_by_reason"].items()) or "none"
    print(f"calibration targets: {summary['used']} used, {summary['skipped']} skipped ({reasons})")
    for label in ("prior", "in_sample"):
        if label in summary:
            print(f"  targets {label:10} rho {summary[label]['spearman']:.3f}")


def print_table(samples: Sequence[Sample], prior: Sequence[float], fitted: Sequence[float],
                summary: dict[str, Any]) -> None:
    order = sorted(range(len(samples)), key=lambda i: samples[i].measured_ms)
    print(f"{'#':>3} {'BN':>4} {'BK':>4} {'ST':>3} {'W':>2} {'measured':>9} {'prior':>8} {'fitted':>8}  bound")
    for rank, i in enumerate(order, 1):
        p = samples[i].params
        print(f"{rank:>3} {p.get('BN', 0):>4} {p.get('BK', 0):>4} {p.get('STAGES', 0):>3} {p.get('WARPS', 0):>2} "
              f"{samples[i].measured_ms:>9.3f} {prior[i] * 1e3:>8.3f} {fitted[i] * 1e3:>8.3f}  "
              f"{samples[i].prediction.bound.name}")
    cv = summary["cross_validation"]
    rows = [("prior", summary["prior"]), ("in-sample", summary["in_sample"]),
            (f"{cv['k']}-fold held-out (pooled)", cv["pooled_held_out"])]
    print(f"\n{'':28} {'rho':>6} {'top5':>5} {'top10':>6}")
    for label, fig in rows:
        print(f"{label:28} {fig['spearman']:>6.3f} {fig['top5_recall']:>5.2f} {fig['top10_recall']:>6.2f}")
    print(f"{cv['k']}-fold rho per fold: {', '.join(f'{r:.3f}' for r in cv['spearman_per_fold'])} "
          f"(mean {cv['spearman_mean_of_folds']:.3f})")
    print("factors: " + ", ".join(f"{k}={v:.3g}" for k, v in summary["factors"].items()))
    print(f"at bound: {summary['at_bound'] or 'none'}; inert: {summary['inert'] or 'none'}; "
          f"rms log error {summary['rms_log_error_in_sample']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
