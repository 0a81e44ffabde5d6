"""`scripts/spot_check_cost.py` on a CPU shape: it runs the protocol's checks both ways and reports their counts
(the seconds are a GPU-host figure for RESULTS.md, not asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import spot_check_cost


def test_it_times_the_protocols_checks_with_the_reference_reused_and_recomputed(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    assert spot_check_cost.main(["--op", "kda_forward", "--shapes", "cpu_tiny", "--device", "cpu",
                                 "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["shape"] == "cpu_tiny" and row["sets"] >= 2 and row["checks"] == 4 * row["sets"]
    assert row["reused_s"] >= 0 and row["recomputed_s"] >= 0
