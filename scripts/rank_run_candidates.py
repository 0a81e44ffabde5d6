"""How well the current cost model ranks the candidates an evolve run timed (no GPU needed).

    python3 scripts/rank_run_candidates.py RUN_DIR [RUN_DIR ...] [--json OUT]

Reads every timed candidate (a measured median) from each run's database, dedupes them by IR hash,
re-predicts each with the current model at the workload's fitness shape, and prints Spearman rho and
top-5 recall against the measured times, then one row per schedule.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cake.experiments.workload import get_workload
from cake.ir import nodes as n
from cake.ir.cost import CostError, predict
from cake.ir.cost_calibration import spearman, top_k_recall
from cake.ir.parser import parse

from cake.runs.store import RunStore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    measured: dict[str, tuple[str, float, str]] = {}  # ir hash -> (text, measured ms, op)
    for run in args.runs:
        store = RunStore.open(run)
        op = str(store.config.get("op", "kmeans_assign"))
        for row in store.candidates():
            if row.evaluation is not None and row.evaluation.measured_ms is not None:
                measured[row.ir_hash] = (row.ir_text, row.evaluation.measured_ms, op)
    rows = []
    for digest, (text, ms, op) in measured.items():
        shape = get_workload("flash_kmeans").fitness_shape(op)
        kernel = parse(text, digest)
        try:
            predicted = predict(kernel, dims=shape.dim_map, dtype=n.DType(shape.ir_dtype)).time_ms
        except CostError as error:
            print(f"{digest}: not predicted ({error})", file=sys.stderr)
            continue
        rows.append({"ir_hash": digest, "measured_ms": ms, "predicted_ms": predicted})
    if len(rows) < 2:
        print("fewer than two timed candidates: no ranking to report", file=sys.stderr)
        return 1
    meas = [r["measured_ms"] for r in rows]
    pred = [r["predicted_ms"] for r in rows]
    summary = {"schedules": len(rows), "spearman": spearman(pred, meas), "top5_recall": top_k_recall(pred, meas, 5)}
    print(f"{summary['schedules']} timed schedules: Spearman rho {summary['spearman']:.3f}, "
          f"top-5 recall {summary['top5_recall']:.2f}")
    for r in sorted(rows, key=lambda r: r["measured_ms"]):
        print(f"  {r['ir_hash']}  measured {r['measured_ms']:8.3f} ms  predicted {r['predicted_ms']:8.3f} ms")
    if args.json:
        args.json.write_text(json.dumps({**summary, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
