"""Every configuration of an update bucket table through the kmeans_update contract battery, per dtype and seed.

    python3 scripts/gpu_update_gates.py --table $RES/update_buckets.json --out $RES/update_gates.json
    python3 scripts/gpu_update_gates.py --device cpu --dtypes fp32 --seeds 0 --out /tmp/g.json   # CPU, interpreter

A table's buckets run different param assignments of the same schedules, and the verifier's gate shapes are
small, so gating the bucketed callable would reach only the buckets those shapes fall in: each distinct
(schedule, params) is gated on its own here, one isolated worker per dtype with every seed in it
(`verify_seeds_in_worker`: one compile); `--jobs N` runs N such workers at once. Each (config, dtype, seed) verdict is cached under the key
scripts/gpu_update_bench.py's gate step looks up, so the bench that follows does not run the battery again.
Writes OUT (every verdict's summary) and prints one line per config and dtype; exit 1 when any failed.
Expected runtime on the H200: ~20 s per configuration and dtype (compile + one battery per seed), run one
after another; with --jobs 6 two configurations in three dtypes take ~30 s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cake.experiments.kmeans.update_choice import DEFAULT_TABLE, Bucket, config_ref, load_table

OP = "kmeans_update"
# The battery's dtype names (torch's), the same the bench's gate step asks for: one verdict-cache key.
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def main(argv: Sequence[str] | None = None) -> int:
    from cake.verifier.multiseed import verify_seeds_in_worker

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=DEFAULT_TABLE, help="the bucket table (JSON)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--backend", choices=("triton", "cuda"), default="triton")
    ap.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["bf16", "fp16", "fp32"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per gate before the worker is killed")
    ap.add_argument("--jobs", type=int, default=1, help="(config, dtype) workers run at once")
    args = ap.parse_args(argv)
    table = load_table(args.table)
    jobs = [(bucket, dtype) for bucket in table.configs() for dtype in args.dtypes]

    def gate(job: tuple[Bucket, str]) -> dict[str, object]:
        bucket, dtype = job
        result = verify_seeds_in_worker(OP, config_ref(table, bucket, args.backend), seeds=args.seeds,
                                        device=args.device, dtypes=[DTYPES[dtype]], all_gates=False,
                                        timeout_s=args.timeout)
        users = [b.name for b in table.buckets if b.config == bucket.config]
        print(f"{bucket.describe():48s} {dtype:5s} seeds {args.seeds}: {'PASSED' if result.passed else 'FAILED'} "
              f"{result.summary()}  (buckets: {', '.join(users)})", flush=True)
        return {"config": bucket.describe(), "buckets": users, "dtype": dtype, "seeds": list(args.seeds),
                "passed": result.passed, "summary": result.summary()}

    # Each job is its own worker process (the threads only wait on them): the GPU runs them side by side.
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(gate, jobs))
    passed = all(bool(r["passed"]) for r in rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"table": str(args.table), "device": args.device, "backend": args.backend,
                                    "all_passed": passed, "verdicts": rows}, indent=2) + "\n")
    print(f"{OP}: {'PASSED' if passed else 'FAILED'} ({len(rows)} config x dtype rows); wrote {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
