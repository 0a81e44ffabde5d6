"""How much the first rep after each event sync moves a candidate's measured speedup, from stored samples.

    python3 scripts/timing_sync_bias.py [RESULTS_GLOB ...] [--baseline triton_assign] [--json OUT]

Until session 26 the timing protocol (`verifier.timing.measure`) synchronized the device to read its events every
`TimingConfig.sync_every` reps; the next rep then started on an idle GPU, and the contestant timed first in it (the
candidate, in the default fixed order) could carry the host's launch latency. The protocol now reads one batch
behind the one it has queued, so samples taken since should show no such rep (a figure near 0 over them). For every stored bench sample file (`*.bench.json`, `*.retime.json` of evolve runs)
with the candidate and `--baseline` timed over at least 50 reps, this prints the ratio of the speedup computed
without those reps to the speedup as measured, minus one (positive: the protocol made the candidate look slower).
A reading of committed data, not a timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from cake.verifier.timing import TimingConfig

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GLOBS = ("results/h200-2026-12-0[45]/**/candidates/*.bench.json",
                 "results/h200-2026-12-0[45]/**/candidates/*.retime.json")
MIN_REPS = 50


def bias(samples: dict[str, list[float]], baseline: str, period: int) -> float | None:
    """The speedup over `baseline` without the reps that follow a sync, over the speedup with them, minus one."""
    mine, theirs = samples.get("candidate") or [], samples.get(baseline) or []
    reps = min(len(mine), len(theirs))
    if reps < MIN_REPS:
        return None
    kept = [i for i in range(reps) if i % period != 0]
    measured = statistics.median(theirs[:reps]) / statistics.median(mine[:reps])
    without = statistics.median([theirs[i] for i in kept]) / statistics.median([mine[i] for i in kept])
    return without / measured - 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("globs", nargs="*", default=list(DEFAULT_GLOBS), help="sample files, relative to the repo")
    parser.add_argument("--baseline", default="triton_assign")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    period = TimingConfig().sync_every
    files = sorted({p for pattern in args.globs for p in ROOT.glob(pattern)})
    biases = []
    for path in files:
        data = json.loads(path.read_text())
        for shape in data.get("shapes", []):
            found = bias({m["name"]: m.get("times_ms") or [] for m in shape["measurements"]}, args.baseline, period)
            if found is not None:
                biases.append(found)
    if not biases:
        print(f"error: no sample file with the candidate and {args.baseline} over {MIN_REPS}+ reps", file=sys.stderr)
        return 2
    summary = {"files": len(files), "measurements": len(biases), "sync_every": period,
               "median": statistics.median(biases), "min": min(biases), "max": max(biases)}
    print(f"{len(biases)} measurements in {len(files)} files (a sync every {period} reps): speedup without the "
          f"first rep after each sync / as measured - 1: median {summary['median']:+.4f}, "
          f"[{summary['min']:+.4f}, {summary['max']:+.4f}]")
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
