"""Ping-pong assign variants at the CAKE cell through `cake bench`: verified by the gates, then timed
interleaved with flash-kmeans. A table and JSON of every variant's median against flash-kmeans'.

    python3 scripts/gpu_assign_variants.py --out "$OUT" [--max-seconds 3]

Each variant is a shipped schedule at a param assignment, written specialized (`experiments.schedules`)
and lowered by the CUDA backend. `cake bench` runs in its own process per variant, so a variant that
crashes or hangs costs its own time only; it refuses to time one that fails its gates (bf16 battery).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from cake.agents.cake_toolchain import bench_medians
from cake.experiments.kmeans.workload import FOLDER
from cake.experiments.schedules import write_specialized

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


def bench_variant(path: Path, max_seconds: float, out: Path) -> dict[str, object]:
    target = out / f"{path.stem}.json"
    command = [sys.executable, "-m", "cake", "bench", "--schedule", str(path), "--shapes", SHAPE,
               "--baseline", BASELINE, "--max-seconds", str(max_seconds), "--json", str(target)]
    env = {**os.environ, "CAKE_BACKEND": "cuda"}
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=VARIANT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"status": f"timed out after {VARIANT_TIMEOUT_S:g} s"}
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-6:]
    data = json.loads(target.read_text()) if target.is_file() else {}
    ours, baselines = bench_medians(data, SHAPE)
    mine, theirs = ours.get(SHAPE), baselines.get(BASELINE, {}).get(SHAPE)
    return {"status": "timed" if mine else f"exit {proc.returncode}", "ms": mine, "flash_kmeans_ms": theirs,
            "speedup": theirs / mine if mine and theirs else None, "seconds": round(time.perf_counter() - started, 1),
            "tail": tail}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=3.0, help="timing guard per variant")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, params in VARIANTS:
        path = write_specialized(FOLDER / name, params, args.out)
        row = {"schedule": name, "params": params, **bench_variant(path, args.max_seconds, args.out)}
        rows.append(row)
        speed = f"{row['speedup']:.3f}x" if row.get("speedup") else "-"
        print(f"{name:28} {json.dumps(params):36} {row.get('ms') or '-':>10} ms  fk {row.get('flash_kmeans_ms') or '-'}"
              f"  {speed}  {row['status']}", flush=True)
        (args.out / "assign_variants.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
