"""How a calibration fitted on one key ranks another key's timings it never saw: the transfer a search makes when it
prices with a calibration of another clock or shape (the CUDA search, timed by events at the cell, prices with the
codegen-4 CUDA-graph key fitted on variant runs at a smaller shape: `calibration_for` with no toolchain).

    python3 scripts/cost_transfer.py                       # graph key -> the kmeans evolve runs (events key)
    python3 scripts/cost_transfer.py --from KEY --to KEY [--json OUT]

Fits the factors and the learned correction (`cake.ir.cost_correction`) on every non-win timing of `--from`, as
`fit_cost_model.py --write` stores them, and reports Spearman rho, top-5 and top-10 recall on every timing of `--to`
per timing shape: at prior factors, under the fitted factors alone, and under factors plus correction.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import cost_data
import fit_cost_model as fcm

GRAPH = "cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-4+graph"
EVOLVE = "cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-4+events"


def transfer(source: list[cost_data.Sample], target: list[cost_data.Sample]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per timing shape of `target`: its figures at prior factors, under the factors fitted on `source` (wins
    kept out), and under those factors plus the correction fitted on the same timings."""
    train = [s for s in source if not s.kept_out]
    factors = fcm.fit_on(train).factors
    correction = fcm.correct_on(train)
    groups: dict[str, list[cost_data.Sample]] = {}
    for s in target:
        groups.setdefault(fcm.shape_tag(s), []).append(s)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for tag, group in sorted(groups.items()):
        measured = [s.measured_ms for s in group]
        out[tag] = {"prior": fcm.figures([s.prediction.time_s for s in group], measured),
                    "factors": fcm.figures([s.prediction.retimed(factors) for s in group], measured),
                    "factors+correction": fcm.figures([fcm.predicted_s(s, factors, correction) for s in group],
                                                      measured)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", default=GRAPH, help="the key fitted on")
    parser.add_argument("--to", dest="target", default=EVOLVE, help="the key ranked")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    loaded = cost_data.load_sources(cost_data.default_sources())
    by_key: dict[str, list[cost_data.Sample]] = {}
    for s in loaded.samples:
        by_key.setdefault(str(s.key), []).append(s)
    missing = [k for k in (args.source, args.target) if k not in by_key]
    if missing:
        print(f"cost_transfer: no timings under {', '.join(missing)}; keys: {', '.join(sorted(by_key))}",
              file=sys.stderr)
        return 2
    out = transfer(by_key[args.source], by_key[args.target])
    train = [s for s in by_key[args.source] if not s.kept_out]
    print(f"fitted on {args.source} ({len(train)} timings); ranked {args.target}")
    for tag, rows in out.items():
        for name, fig in rows.items():
            print(f"   {tag} {name:20} n {fig['n']:>4}  rho {fcm._fmt(fig['spearman'])}  "
                  f"top-5 {fcm._fmt(fig['top5_recall'], '.2f')}  top-10 {fcm._fmt(fig['top10_recall'], '.2f')}")
    if args.json is not None:
        args.json.write_text(json.dumps({"from": args.source, "to": args.target, "fitted_on": len(train),
                                         "by_shape": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
