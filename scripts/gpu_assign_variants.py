"""Ping-pong assign variants at the CAKE cell through the evaluator's bench worker: verified by the gates,
then timed interleaved with flash-kmeans. A table and JSON of every variant's median against flash-kmeans'.

    python3 scripts/gpu_assign_variants.py --out "$OUT" [--max-seconds 3]

Each variant is a shipped schedule at a param assignment, written specialized (`experiments.schedules`)
and lowered by the CUDA backend. The bench worker runs in its own process per variant, so a variant that
crashes or hangs costs its own time only; it refuses to time one that fails its gates (bf16 battery).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cake.experiments.kmeans.workload import ASSIGN, FOLDER
from cake.experiments.schedules import write_specialized

from cake.evaluation.bench import BenchRequest, BenchTimes
from cake.evaluation.evaluator import KernelSpec, run_bench_worker

SHAPE = "cake_cell"
BASELINE = "flash_kmeans"
# (schedule file, params): the shipped ping-pong at its defaults and a few moves that change how much of a
# point tile's load is hidden (x2: double-buffered points) or how deep the centroid ring is.
VARIANTS: tuple[tuple[str, dict[str, int]], ...] = (
    ("assign_pingpong.cake", {}),
    ("assign_pingpong.cake", {"STAGES": 3}),
    ("assign_pingpong.cake", {"STAGES": 5}),
    ("assign_pingpong.cake", {"STAGES": 2}),
    ("assign_pingpong_x2.cake", {}),
    ("assign_pingpong_x2.cake", {"STAGES": 3}),
    ("assign_pingpong_x2.cake", {"BN": 64, "BK": 128, "STAGES": 2}),
    ("assign_pingpong_x2.cake", {"BN": 64, "BK": 64, "STAGES": 4}),
)
VARIANT_TIMEOUT_S = 120.0


def bench_variant(path: Path, max_seconds: float) -> dict[str, object]:
    request = BenchRequest("kmeans_assign", KernelSpec(path, "cuda").ref(), (ASSIGN.shape(SHAPE),), (BASELINE,),
                           max_seconds=max_seconds)
    started = time.perf_counter()
    outcome, tail = run_bench_worker(request, "cuda", timeout_s=VARIANT_TIMEOUT_S)
    times = outcome if isinstance(outcome, BenchTimes) else BenchTimes()
    mine, theirs = times.candidate.get(SHAPE), times.baselines.get(BASELINE, {}).get(SHAPE)
    status = "timed" if mine else (outcome if isinstance(outcome, str) else times.refused or "no time")
    return {"status": status, "ms": mine, "flash_kmeans_ms": theirs,
            "speedup": theirs / mine if mine and theirs else None, "seconds": round(time.perf_counter() - started, 1),
            "tail": tail.splitlines()[-6:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=3.0, help="timing guard per variant")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, params in VARIANTS:
        path = write_specialized(FOLDER / name, params, args.out)
        row = {"schedule": name, "params": params, **bench_variant(path, args.max_seconds)}
        rows.append(row)
        speed = f"{row['speedup']:.3f}x" if row.get("speedup") else "-"
        print(f"{name:28} {json.dumps(params):36} {row.get('ms') or '-':>10} ms  fk {row.get('flash_kmeans_ms') or '-'}"
              f"  {speed}  {row['status']}", flush=True)
        (args.out / "assign_variants.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
