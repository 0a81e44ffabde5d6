"""Fit and validate the cost model's calibration on a committed GPU run (no GPU needed).

    python -m cake.experiments.fit_cost_model                       # the first H200 run
    python -m cake.experiments.fit_cost_model --no-write            # figures only

Reads `experiments/data/<run>/bench_cost_model.json` (written by `bench_cost_model.py` on the GPU), re-predicts
every timed schedule with the *current* model at the CAKE cell, and reports Spearman rho and top-k recall:

- prior: the model with every factor 1.0;
- in-sample: factors fitted on all timed schedules (`cake.ir.cost_calibration.fit_factors`);
- k-fold: factors fitted on k-1 folds, each held-out fold ranked with factors that never saw it; the figures
  are the mean over folds of the per-fold rho, and rho / top-k over the pooled held-out predictions.

Writes the in-sample calibration into `ir/data/cost_calibration.json` for (device, toolchain) and a summary
to `experiments/data/<run>/cost_fit.json`. Fits that end at a bound are reported, never silently kept.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.experiments.flash_kmeans import shapes
from cake.ir.cost import Prediction, predict
from cake.ir.cost_calibration import (
    DATA_PATH,
    Calibration,
    Factors,
    Fit,
    fit_factors,
    spearman,
    store_calibration,
    top_k_recall,
)
from cake.ir.nodes import DType
from cake.ir.parser import parse

HERE = Path(__file__).resolve().parent
RUN = HERE / "data" / "h200-2026-11-30"
DEVICE_NAMES = {"NVIDIA H200": "H200"}
TOP_K = (5, 10)


@dataclass(frozen=True, slots=True)
class Sample:
    schedule: str
    params: dict[str, int]
    measured_ms: float
    prediction: Prediction


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
            kernels[name] = parse((HERE / "flash_kmeans" / name).read_text(), name)
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


def cross_validate(samples: Sequence[Sample], k: int, seed: int) -> dict[str, Any]:
    """Fit on k-1 folds, rank the held-out fold; the held-out fold never informs its own factors."""
    measured = [s.measured_ms for s in samples]
    pooled = [0.0] * len(samples)
    per_fold = []
    bound_hits: list[list[str]] = []
    for test in folds(len(samples), k, seed):
        held = set(test)
        fit = fit_on([s for i, s in enumerate(samples) if i not in held])
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
    args = parser.parse_args(argv)
    report, samples = load_samples(args.run)
    measured = [s.measured_ms for s in samples]
    prior = [s.prediction.time_s for s in samples]
    fit = fit_on(samples)
    fitted = [s.prediction.retimed(fit.factors) for s in samples]
    cv = cross_validate(samples, args.folds, args.seed)
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
    print_table(samples, prior, fitted, summary)
    if fit.warning():
        print(f"WARNING: {fit.warning()}", file=sys.stderr)
    if not args.no_write:
        device = DEVICE_NAMES.get(report["device"], report["device"])
        cal = Calibration(device, report["toolchain"], fit.factors, len(samples), summary["prior"]["spearman"],
                          summary["in_sample"]["spearman"], "2026-11-30",
                          f"fitted by experiments/fit_cost_model.py on {args.run.name}; {args.folds}-fold held-out "
                          f"rho {cv['pooled_held_out']['spearman']:.3f} (pooled)", fit.at_bound)
        store_calibration(cal, DATA_PATH)
        (args.run / "cost_fit.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


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
