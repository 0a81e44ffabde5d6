"""scripts/timing_sync_bias.py: the speedup a candidate loses to the first rep after each event sync."""

from __future__ import annotations

import timing_sync_bias


def test_slow_reps_after_each_sync_read_as_a_bias_against_the_candidate() -> None:
    baseline = [1.0] * 100
    assert timing_sync_bias.bias({"candidate": [1.0] * 100, "b": baseline}, "b", 8) == 0.0
    spread = [1.0 + 0.001 * (i % 7) for i in range(100)]  # a candidate's ordinary spread, unrelated to the syncs
    slowed = [t + (0.5 if i % 8 == 0 else 0.0) for i, t in enumerate(spread)]
    spread_only = timing_sync_bias.bias({"candidate": spread, "b": baseline}, "b", 8)
    with_syncs = timing_sync_bias.bias({"candidate": slowed, "b": baseline}, "b", 8)
    assert spread_only is not None and with_syncs is not None
    assert with_syncs > spread_only and with_syncs > 0.0

def test_too_few_reps_say_nothing() -> None:
    assert timing_sync_bias.bias({"candidate": [1.0] * 10, "b": [1.0] * 10}, "b", 8) is None
    assert timing_sync_bias.bias({"b": [1.0] * 100}, "b", 8) is None
