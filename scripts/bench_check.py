"""Benchmark: median time of `cake check` (parse + every check, in-process) per typical schedule.

    python scripts/bench_check.py [--repeat 50] [--out bench_check.json]

Schedules: every shipped `experiments/**/*.cake` and the checker's fixture bases. The Lark parser is
built once before timing (as in a long-running agent loop); each sample parses and checks the text from
scratch. Prints a table and writes JSON. The target is a median of at most 10 ms per schedule.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from cake.experiments.schedules import shipped_schedule_paths
from cake.ir.check import check, check_text
from cake.ir.checks.fixtures import BASES
from cake.ir.parser import parse

TARGET_MS = 10.0
ROOT = Path(__file__).resolve().parent


def schedules() -> dict[str, str]:
    found = {str(p.relative_to(ROOT.parent)): p.read_text() for p in shipped_schedule_paths()}
    found.update({f"fixture:{name}": text for name, text in BASES.items()})
    return found


def time_one(name: str, text: str, repeat: int) -> dict[str, float | int]:
    samples, parse_samples, check_samples = [], [], []
    diagnostics = check_text(text, name)  # warm-up (and the count to report)
    for _ in range(repeat):
        start = time.perf_counter()
        check_text(text, name)
        samples.append((time.perf_counter() - start) * 1e3)
        # The same work split in two, to show where the time goes.
        start = time.perf_counter()
        kernel = parse(text, name)
        middle = time.perf_counter()
        check(kernel, file=name)
        parse_samples.append((middle - start) * 1e3)
        check_samples.append((time.perf_counter() - middle) * 1e3)
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples),
            "parse_median_ms": statistics.median(parse_samples), "check_median_ms": statistics.median(check_samples),
            "lines": text.count("\n") + 1, "diagnostics": len(diagnostics), "repeat": repeat}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("bench_check.json"))
    args = parser.parse_args()
    results = {name: time_one(name, text, args.repeat) for name, text in schedules().items()}
    width = max(len(n) for n in results)
    print(f"{'schedule':<{width}}  lines  median ms  (parse + check)  min ms  max ms  diags")
    for name, r in results.items():
        print(f"{name:<{width}}  {r['lines']:>5}  {r['median_ms']:>9.2f}  ({r['parse_median_ms']:>5.2f} + "
              f"{r['check_median_ms']:>5.2f})  {r['min_ms']:>6.2f}  {r['max_ms']:>6.2f}  {r['diagnostics']:>5}")
    overall = statistics.median(r["median_ms"] for r in results.values())
    worst = max(r["median_ms"] for r in results.values())
    print(f"median over schedules: {overall:.2f} ms; worst schedule median: {worst:.2f} ms; target <= {TARGET_MS} ms")
    import os

    report = {"schedules": results, "load_average": os.getloadavg(), "cpus": os.cpu_count(), "median_of_medians_ms": overall, "worst_median_ms": worst,
              "target_ms": TARGET_MS, "python": platform.python_version(), "machine": platform.machine()}
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
