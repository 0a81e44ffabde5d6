"""The calibration fit on the committed H200 run: deterministic, and at the figures it reported."""

from __future__ import annotations

import json

import fit_cost_model as fcm
import pytest
from cake.ir.cost_calibration import spearman, top_k_recall


def test_fit_on_the_committed_run_reaches_its_reported_in_sample_figures() -> None:
    summary = json.loads((fcm.RUN / "cost_fit.json").read_text())
    _, samples = fcm.load_samples(fcm.RUN)
    assert len(samples) == summary["timed"] >= 50
    fit = fcm.fit_on(samples)
    assert fit.factors.to_json() == pytest.approx(summary["factors"], rel=1e-9)
    assert list(fit.at_bound) == summary["at_bound"]
    measured = [s.measured_ms for s in samples]
    fitted = [s.prediction.retimed(fit.factors) for s in samples]
    assert spearman(fitted, measured) == pytest.approx(summary["in_sample"]["spearman"], abs=1e-12)
    assert top_k_recall(fitted, measured, 5) == summary["in_sample"]["top5_recall"]
    prior = [s.prediction.time_s for s in samples]
    assert spearman(prior, measured) == pytest.approx(summary["prior"]["spearman"], abs=1e-12)


def test_folds_partition_the_samples() -> None:
    parts = fcm.folds(75, 5, seed=0)
    assert sorted(i for p in parts for i in p) == list(range(75))
    assert parts == fcm.folds(75, 5, seed=0)
