"""Where the host time of one CUDA-backend call goes: per-call host time and a cProfile of the call path.

    python3 scripts/gpu_host_overhead.py --out "$OUT" [--schedule experiments/kmeans/assign_pingpong.cake]

Runs the schedule at the CAKE cell (bf16) on the GPU. It measures three things per call, as medians:
- host: the time for the call to return, with no synchronization;
- device: CUDA events around the call;
- synced: the call followed by `torch.cuda.synchronize()`, which is what a caller waiting on the result sees.
It then profiles 50 calls with cProfile and prints the 30 most expensive functions by cumulative time. The
inputs rotate over 4 sets, as the timing protocol's do. Writes `host_overhead.json` and `host_profile.txt`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from pathlib import Path

import torch
from cake.experiments.schedules import load_schedule_file

CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}
ROTATION = 4
REPS = 30
PROFILED_CALLS = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedule", default="experiments/kmeans/assign_pingpong.cake")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    kernel = load_schedule_file(Path(args.schedule), backend=args.backend)
    b, n, k, d = (CELL[x] for x in "BNKD")
    sets = [(torch.randn(b, n, d, device="cuda", dtype=torch.bfloat16),
             torch.randn(b, k, d, device="cuda", dtype=torch.bfloat16)) for _ in range(ROTATION)]
    for x, c in sets:  # compile, load, encode every set's tensor maps
        kernel(x, c)
    torch.cuda.synchronize()

    host, device, synced = [], [], []
    for i in range(REPS):
        x, c = sets[i % ROTATION]
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        kernel(x, c)
        end.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        synced.append((t2 - t0) * 1e3)
        device.append(start.elapsed_time(end))

    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    for i in range(PROFILED_CALLS):
        kernel(*sets[i % ROTATION])
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
    (args.out / "host_profile.txt").write_text(text.getvalue())

    result = {"schedule": args.schedule, "backend": args.backend, "shape": CELL, "reps": REPS,
              "host_ms_median": statistics.median(host), "device_ms_median": statistics.median(device),
              "synced_ms_median": statistics.median(synced)}
    (args.out / "host_overhead.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(text.getvalue())


if __name__ == "__main__":
    main()
