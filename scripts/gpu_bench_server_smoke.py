"""The bench server on a GPU, before an evolve run relies on it: three ping-pong variants gated and timed at the
kmeans cell, the first in a one-shot bench process (as before session 23), the next two on one bench server (as an
evolve run's evaluations now are). Each is a different schedule, so the verdict cache answers none of them.

    python3 scripts/gpu_bench_server_smoke.py --out DIR

Writes DIR/bench_server_smoke.json: per request its wall seconds, status, its bench run's `stages_s` and
`verifier_ahead` (the second server request should find its verifier worker started ahead), and `ok` (all three
timed). What it measures: the wall a request saves on a warm server against a one-shot process, the process starts
the evaluator no longer pays. Exit status 0 when ok, 3 when not (the GPU script then runs the seeds with
`--no-reuse-bench-process`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cake.experiments.schedules import write_specialized  # noqa: E402
from cake.lowering.cache import ENV_VAR as CACHE_DIR_ENV  # noqa: E402
from cake.verifier.verdict_cache import CACHE_ENV  # noqa: E402
from gpu_assign_variants import bench_variant, schedule_path  # noqa: E402  (a sibling script)

from cake.evaluation.bench_server import bench_servers  # noqa: E402

# Three depths of the centroid ring that fit sm_90a's shared memory at D = 128 (session 24's first GPU run asked for
# STAGES=5, which needs 233,072 B > 232,448 B: refused at load, so the smoke said "not fit" about the schedule, not
# the server). tests/evaluation/test_bench_server.py checks each against the CUDA backend at the cell.
REQUESTS = (("one-shot", {"STAGES": 4}, False), ("server, first", {"STAGES": 3}, True),
            ("server, second", {"STAGES": 2}, True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-seconds", type=float, default=3.0, help="timing guard per request")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    # Fresh verdict and compile caches, so that no request is answered by what an earlier stage gated or compiled
    # (session 24: the one-shot request's STAGES=4 is the shipped ping-pong, verified by the stage before; its gates
    # took 0.03 s against the server's first 13.4 s). Set before any bench process starts: they inherit them.
    os.environ[CACHE_ENV] = str(args.out / "verdicts")
    os.environ[CACHE_DIR_ENV] = str(args.out / "compiled")
    rows = []
    try:
        for label, params, reuse in REQUESTS:
            path = write_specialized(schedule_path("assign_pingpong.cake"), params, args.out)
            keep = args.out / f"{path.stem}.bench.json"
            started = time.perf_counter()
            row = bench_variant(path, args.max_seconds, ("triton_assign",), reuse=reuse, keep=keep)
            run = json.loads(keep.read_text()) if keep.is_file() else {}
            rows.append({"request": label, "params": params, "reuse": reuse,
                         "wall_s": round(time.perf_counter() - started, 2), "status": row["status"], "ms": row["ms"],
                         "stages_s": run.get("stages_s"), "verifier_ahead": run.get("verifier_ahead")})
            print(f"{label:16} {rows[-1]['wall_s']:7.2f} s  {row['status']}  verifier ahead: "
                  f"{rows[-1]['verifier_ahead']}  stages {rows[-1]['stages_s']}", flush=True)
    finally:
        bench_servers().close_all()
    ok = all(r["status"] == "timed" for r in rows)
    (args.out / "bench_server_smoke.json").write_text(json.dumps({"ok": ok, "requests": rows}, indent=1) + "\n")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
