"""`scripts/gpu_evolve.py --rate`: the evaluation rate of a committed H200 run (session 11, seed 4: before compiles
ahead), read from its store — the figure the session-13 GPU script's run is compared with."""

from __future__ import annotations

from pathlib import Path

from gpu_evolve import evaluation_rate, rate_line

S11 = Path(__file__).resolve().parents[2] / "results" / "h200-2026-12-03" / "s11-calls" / "evolve4" / "evolve" / "run"


def test_the_rate_of_the_session_11_evolve() -> None:
    rate = evaluation_rate(S11)
    assert rate["evaluations"] == 5 and rate["evaluations_per_minute"] == 1.02
    assert rate["evaluation_s_median"] == 39.7  # each evaluation compiled its own 10 specializations
    assert rate["ahead"] == {"compiled_ahead": 0, "worker_s_median": None, "nvcc_s_median": None, "problems": [],
                             "specializations": {"built": 0, "cached": 0, "refused": 0, "failed": 0}}
    curve = rate["best_vs_time"]
    assert isinstance(curve, list) and [p["evaluations"] for p in curve] == [1, 2, 3, 4, 5]
    assert curve[-1]["best"] == max(p["best"] for p in curve)
    assert rate_line(rate).startswith("rate: 5 evaluations in 292.8 s = 1.02/min")
