"""How well one schedule's time repeats across runs: in milliseconds, and as a ratio to the baseline its own process
timed beside it (`cost_data.ANCHOR_BASELINE`). The evidence for reading timings as ratios (`cost_data.anchor_times`).

    python3 scripts/anchor_repeatability.py [SOURCES ...] [--json OUT]

For every key (backend, device, toolchain) and shape of the committed timing data (the sources of
`scripts/fit_cost_model.py`), each IR timed in two or more runs whose every timing has the anchor beside it: the
largest over the smallest of its per-run times, raw and anchored. Quantiles over those IRs per key. A reading of
committed timings, not a timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cost_data


def spreads(samples: Sequence[cost_data.Sample]) -> dict[str, list[float]]:
    """Per IR timed in >= 2 runs with an anchor everywhere: max/min over its runs' times, raw and as anchor ratios."""
    by_ident: dict[str, dict[str, list[cost_data.Sample]]] = {}
    for s in samples:
        by_ident.setdefault(s.ident, {}).setdefault(s.run, []).append(s)
    out: dict[str, list[float]] = {"raw": [], "anchored": []}
    for runs in by_ident.values():
        if len(runs) < 2 or any(s.anchor_ms is None for group in runs.values() for s in group):
            continue
        raw = [statistics.median(s.measured_ms for s in group) for group in runs.values()]
        ratio = [statistics.median(s.measured_ms / s.anchor_ms for s in group if s.anchor_ms) for group in runs.values()]
        out["raw"].append(max(raw) / min(raw))
        out["anchored"].append(max(ratio) / min(ratio))
    return out


def anchor_drift(samples: Sequence[cost_data.Sample]) -> list[float]:
    """Per run whose every timing has an anchor (two or more): the largest over the smallest anchor time it timed,
    i.e. how far the GPU's speed moved within the run."""
    by_run: dict[str, list[float]] = {}
    lacking: set[str] = set()
    for s in samples:
        if s.anchor_ms is None:
            lacking.add(s.run)
        else:
            by_run.setdefault(s.run, []).append(s.anchor_ms)
    return sorted(max(a) / min(a) for run, a in by_run.items() if run not in lacking and len(a) >= 2)


def quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "p90": ordered[int(0.9 * (len(ordered) - 1))], "max": ordered[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", type=Path, help="as fit_cost_model.py (default: the committed data)")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    loaded = cost_data.load_sources(args.sources or cost_data.default_sources(), anchored=False)
    groups: dict[tuple[str, str], list[cost_data.Sample]] = {}
    for s in loaded.samples:
        groups.setdefault((str(s.key), cost_data.timing_shape(s)), []).append(s)
    report: list[dict[str, Any]] = []
    for (key, shape), samples in sorted(groups.items()):
        found = spreads(samples)
        if not found["raw"]:
            continue
        drift = anchor_drift(samples)
        row = {"key": key, "shape": shape, "irs": len(found["raw"]),
               **{kind: quantiles(values) for kind, values in found.items()},
               "anchor_drift_in_runs": {"runs": len(drift), "min": drift[0], "max": drift[-1]} if drift else None}
        report.append(row)
        print(f"{key} at {shape}: {row['irs']} IRs timed in 2+ runs; max/min of their runs' times")
        for kind in ("raw", "anchored"):
            q = row[kind]
            print(f"   {kind:9} median {q['median']:.4f}  p90 {q['p90']:.4f}  max {q['max']:.4f}")
        if drift:
            print(f"   within a run, max/min of its {cost_data.ANCHOR_BASELINE} times: {drift[0]:.4f} to {drift[-1]:.4f} "
                  f"over {len(drift)} runs")
    if args.json is not None:
        args.json.write_text(json.dumps({"anchor": cost_data.ANCHOR_BASELINE, "keys": report}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
