"""Do the mma widths the arch table added give right answers on the GPU? (issue 12, item 5)

    source scripts/gpu/setup.sh
    python scripts/gpu_mma_widths.py          # H200: the wgmma widths of the Hopper schedules (~2-4 min)

For each Hopper kmeans-assign schedule and each wgmma width N that the compile enumeration
(`scripts/bench_compile_enumeration.py`) accepts with the column tile resized to N (`BK = 96` with
`wgmma.m64n96k16`, ...), the schedule is lowered with the CUDA backend, run on small shapes with tails (bf16
and fp16) and compared with an fp64 torch reference: an id passes when its distance is within a tolerance
of the row minimum (ties and near-ties accepted). Prints one line per (variant, shape) and writes
`gpu_mma_widths.json` under $OUT (or the working directory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_compile_enumeration import Variant, all_variants, judge
from cake.lowering.runtime import load, lower

SCHEDULES = ("assign_pingpong.cake", "assign_pingpong_x2.cake")
SHAPES = ((2, 301, 197, 128), (1, 64, 96, 128), (3, 1000, 515, 64))  # B, N, K, D: tails in N and K
CHILD_TIMEOUT_S = 60  # one variant: lower, nvcc, load, six checks
TOLERANCE = 1e-2  # relative to the row's distance scale: bf16 inputs, fp32 accumulation


def wide_variants() -> list[Variant]:
    out = []
    for v in all_variants():
        if v.schedule.split("/")[-1] in SCHEDULES and v.label.startswith("wgmma.") and " " in v.label:
            if judge(v, compile_it=False).verdict == "accepted":
                out.append(v)
    return out


def check_one(fn: Any, shape: tuple[int, int, int, int], dtype: Any) -> dict[str, Any]:
    import torch

    b, n, k, d = shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(b, n, d, device="cuda", generator=gen).to(dtype)
    c = torch.randn(b, k, d, device="cuda", generator=gen).to(dtype)
    ids = fn(x, c)
    torch.cuda.synchronize()
    dist = torch.cdist(x.double(), c.double()) ** 2
    best = dist.min(dim=-1).values
    got = dist.gather(-1, ids.long().clamp(0, k - 1).unsqueeze(-1)).squeeze(-1)
    scale = dist.abs().amax(dim=-1).clamp_min(1.0)
    bad = ((got - best) / scale > TOLERANCE) | (ids < 0) | (ids >= k)
    return {"shape": list(shape), "dtype": str(dtype), "mismatches": int(bad.sum()), "points": b * n}


def run_one(index: int) -> dict[str, Any]:
    """Lower, load and check the `index`-th wide variant (in this process: run by `main` in a child)."""
    import torch

    variant = wide_variants()[index]
    entry: dict[str, Any] = {"schedule": variant.schedule, "variant": variant.label, "checks": []}
    fn = load(lower(variant.kernel(), "cuda", filename=variant.schedule))
    for shape in SHAPES:
        for dtype in (torch.bfloat16, torch.float16):
            entry["checks"].append(check_one(fn, shape, dtype))
    return entry


def check_in_child(index: int, variant: Variant) -> dict[str, Any]:
    """Run the `index`-th variant in a child process of its own and return its entry (an error entry when the
    child faults or hangs)."""
    entry: dict[str, Any] = {"schedule": variant.schedule, "variant": variant.label, "checks": []}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--one", str(index)], capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        entry["error"] = f"timed out after {CHILD_TIMEOUT_S} s (a hang)"
    else:
        if proc.returncode == 0:
            entry = json.loads(proc.stdout.strip().splitlines()[-1])
        else:
            lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
            entry["error"] = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "")[:500]
    entry["seconds"] = round(time.perf_counter() - start, 2)
    entry["ok"] = "error" not in entry and all(c["mismatches"] == 0 for c in entry["checks"])
    return entry


def main() -> None:
    """Each variant runs in a child process of its own: a CUDA fault (e.g. a misaligned address) is sticky for
    the process that raised it, so one faulting width would otherwise fail every width after it. Children run
    `--jobs` at a time (nvcc dominates each one; the GPU work per child is a few small launches)."""
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(run_one(int(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="children at once (default: half the cores)")
    args = parser.parse_args()
    variants = wide_variants()
    out = Path(os.environ.get("OUT", ".")) / "gpu_mma_widths.json"
    results: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(check_in_child, i, v) for i, v in enumerate(variants)]
        for future in futures:  # in variant order, so the table reads like the enumeration
            entry = future.result()
            print(f"{'OK  ' if entry['ok'] else 'FAIL'} {entry['schedule'].split('/')[-1]:<26} {entry['variant']:<28} "
                  + (entry.get("error", "")
                     or ", ".join(f"{c['shape']}:{c['mismatches']}" for c in entry["checks"])), flush=True)
            results.append(entry)
            out.write_text(json.dumps(results, indent=1))  # a stage cut by its limit keeps what finished
    print(f"{sum(r['ok'] for r in results)} of {len(results)} widths right")


if __name__ == "__main__":
    main()
