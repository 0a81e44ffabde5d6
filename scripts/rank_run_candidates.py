"""How well the cost model ranks the candidates an evolve run timed (no GPU needed).

    python3 scripts/rank_run_candidates.py RUN_DIR [RUN_DIR ...] [--static] [--json OUT]

Per run: every timed candidate (a measured median, one per IR hash) ranked two ways against the measured times,
Spearman rho and top-5 recall each —

* `in the run`: the predictions the loop stored when it ranked the candidate (what chose the run's queue);
* `today`: the candidate priced again as the run ranked it (`cake.agents.cake_toolchain.Ranker.for_run`: the GPU
  the run recorded, its backend, the bench clock's calibration, and for a GPU run of the CUDA backend the spills
  ptxas reports, compiled here) with today's model and stored calibration. `--static` prices without compiling.

Each is also ranked against the run's times anchored to the baseline each evaluation timed beside it
(`cost_data.ANCHOR_BASELINE`, in milliseconds of its median over the run), where every evaluation has one: the GPU
drifts by several percent over a run, and an interleaved ratio does not (the fitter reads times so, `cost_data`).

Runs are ranked one at a time: two runs may rank for different GPUs, and their times are not one scale.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cake.agents.cake_toolchain import Ranker
from cake.ir.parser import parse
from cost_data import ANCHOR_BASELINE, anchored_ms
from fit_cost_model import figures

from cake.runs.store import CandidateRow, RunStore


@dataclass(frozen=True, slots=True)
class Ranked:
    ir_hash: str
    measured_ms: float
    in_run_ms: float | None  # what the loop stored when it ranked it
    today_ms: float | None
    anchor_ms: float | None = None  # the anchor baseline's time beside it in its evaluation
    anchored_ms: float | None = None  # measured / anchor x the run's median anchor, where every row has an anchor


def ranked_candidates(run: Path, *, static: bool = False) -> tuple[Ranker, list[Ranked]]:
    store = RunStore.open_read_only(run)
    with store:
        ranker = Ranker.for_run(store.config, with_compiler=False if static else None)
        timed: dict[str, CandidateRow] = {}
        for row in store.candidates():
            if row.evaluation is not None and row.evaluation.measured_ms is not None:
                timed.setdefault(row.ir_hash, row)
    rows = list(timed.values())
    today = ranker.predict_many([parse(r.ir_text, r.ir_hash) for r in rows])
    ranked = [Ranked(r.ir_hash, float(r.evaluation.measured_ms), r.predicted_ms, ms,
                     r.evaluation.timings.get(f"{ANCHOR_BASELINE}_ms"))
              for r, ms in zip(rows, today, strict=True) if r.evaluation is not None]
    return ranker, anchored(ranked)


def anchored(rows: list[Ranked]) -> list[Ranked]:
    """`rows` with their anchored times, when every row has its anchor (else unchanged: none is anchored)."""
    found = anchored_ms([r.measured_ms for r in rows], [r.anchor_ms for r in rows])
    if found is None:
        return rows
    return [replace(r, anchored_ms=ms) for r, ms in zip(rows, found[0], strict=True)]


def agreement(rows: list[Ranked], which: str, against: str = "measured_ms") -> dict[str, Any] | None:
    """The fitter's figures (`fit_cost_model.figures`: rho, top-5 and top-10 recall, top-5 regret) of one prediction
    column against one time column, over the rows that have both; None with fewer than two."""
    pairs = [(getattr(r, which), getattr(r, against)) for r in rows
             if getattr(r, which) is not None and getattr(r, against) is not None]
    if len(pairs) < 2:
        return None
    return figures([p for p, _ in pairs], [m for _, m in pairs])


def _said(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return "fewer than two predicted"
    return f"rho {summary['spearman']:.3f}, top-5 {summary['top5_recall']:.2f} over {summary['n']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--static", action="store_true", help="price today without compiling (no spills)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = []
    for run in args.runs:
        ranker, rows = ranked_candidates(run, static=args.static)
        in_run, today = agreement(rows, "in_run_ms"), agreement(rows, "today_ms")
        in_run_anchored = agreement(rows, "in_run_ms", "anchored_ms")
        how = "compiled" if ranker.with_compiler else "static"
        print(f"{run}: {len(rows)} timed, ranked for {ranker.device.name} ({ranker.device_reason}), "
              f"{ranker.backend} backend")
        print(f"  in the run: {_said(in_run)}")
        print(f"  today ({how}): {_said(today)}")
        print(f"  in the run, against times anchored to {ANCHOR_BASELINE}: "
              + (_said(in_run_anchored) if in_run_anchored else "no anchor in every evaluation"))
        for r in sorted(rows, key=lambda r: r.measured_ms):
            stored = "-" if r.in_run_ms is None else f"{r.in_run_ms:.3f}"
            now = "-" if r.today_ms is None else f"{r.today_ms:.3f}"
            print(f"    {r.ir_hash}  measured {r.measured_ms:8.3f} ms  in the run {stored:>8}  today {now:>8}")
        report.append({"run": str(run), "device": ranker.device.name, "backend": ranker.backend, "priced": how,
                       "in_run": in_run, "today": today, "in_run_anchored": in_run_anchored,
                       "rows": [{"ir_hash": r.ir_hash, "measured_ms": r.measured_ms, "in_run_ms": r.in_run_ms,
                                 "today_ms": r.today_ms, "anchored_ms": r.anchored_ms} for r in rows]})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
