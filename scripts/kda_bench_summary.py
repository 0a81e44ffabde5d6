"""The headline of repeated `scripts/gpu_kda_bench.py` processes: per schedule timed (one, or several side by side)
and per shape, the median over processes of each contestant's time and of the schedule's speedup over the fastest
baseline, with the range over the processes; and the geomean speedup over the shapes, per process and as the
median with its range.

    python3 scripts/kda_bench_summary.py BENCH_1.json BENCH_2.json BENCH_3.json [--json OUT.json]

Each process timed every contestant interleaved at every shape (cold L2, medians of its reps); one process's
median is not a result, so a shape counts only when at least MIN_PROCESSES processes timed the schedule there, and
the geomean only over processes that timed every shape asked. The interval is [min, max] over processes (three
processes: no bootstrap would say more). A shape cut or not timed in a process is listed with its reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from cake.stats import geomean

MIN_PROCESSES = 3


def _speedups(bench: dict[str, Any], candidate: str) -> dict[str, float | str]:
    """Shape name -> the candidate's speedup in that process, or why it has none."""
    found: dict[str, float | str] = {}
    for report in bench["shapes"]:
        name = report["shape"]["name"]
        row = next((m for m in report["measurements"] if m["name"] == candidate), None)
        if report.get("cut"):
            found[name] = f"cut: {report['cut']}"
        elif row is None or row["speedup"] is None:
            found[name] = f"not timed: {row['failure'] if row else 'absent'}"
        else:
            found[name] = float(row["speedup"])
    for name in bench["shapes_asked"]:
        found.setdefault(name, "not reached (the process ended first)")
    return found


def _medians(bench: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {r["shape"]["name"]: {m["name"]: m["median_ms"] for m in r["measurements"] if m["median_ms"]}
            for r in bench["shapes"]}


def summarize(benches: list[dict[str, Any]], absent: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per candidate schedule the processes timed (one or several side by side), its headline (`candidate`)."""
    baselines = {m["name"] for b in benches for r in b["shapes"] for m in r["measurements"] if not m["candidate"]}
    candidates = list(dict.fromkeys(c for b in benches for c in b["contestants"] if c not in baselines))
    if not candidates:
        raise SystemExit("the processes timed no schedule (see each JSON's notes)")
    return {"processes": len(benches), "absent": list(absent),
            "candidates": {name: candidate(benches, name) for name in candidates}}


def candidate(benches: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """One schedule over the processes: per shape its median speedup and range, and the geomean over the shapes."""
    shapes = list(dict.fromkeys(s for b in benches for s in b["shapes_asked"]))
    per_process = [_speedups(b, name) for b in benches]
    medians = [_medians(b) for b in benches]
    rows = []
    for shape in shapes:
        ratios = [p[shape] for p in per_process if isinstance(p.get(shape), float)]
        times: dict[str, list[float]] = {}
        for m in medians:
            for contestant, ms in m.get(shape, {}).items():
                times.setdefault(contestant, []).append(ms)
        rows.append({"shape": shape, "processes": len(ratios),
                     "median_ms": {contestant: statistics.median(v) for contestant, v in times.items()},
                     "speedup": statistics.median(ratios) if len(ratios) >= MIN_PROCESSES else None,
                     "range": [min(ratios), max(ratios)] if ratios else None,
                     "missing": [p[shape] for p in per_process if isinstance(p.get(shape), str)]})
    whole = [geomean([p[s] for s in shapes]) for p in per_process  # type: ignore[misc]
             if all(isinstance(p.get(s), float) for s in shapes)]
    return {"schedule": name, "shapes": rows, "geomean_per_process": whole,
            "geomean": statistics.median(whole) if len(whole) >= MIN_PROCESSES else None,
            "geomean_range": [min(whole), max(whole)] if whole else None}


def markdown(summary: dict[str, Any]) -> str:
    lines = [f"no JSON from a process: {path}" for path in summary["absent"]]
    for name, one in summary["candidates"].items():
        lines += [f"{name} over the fastest baseline, {summary['processes']} processes "
                  "(median [min, max] over processes)", "",
                  "| shape | baseline ms | schedule ms | speedup |", "|---|---|---|---|"]
        baselines = {k for row in one["shapes"] for k in row["median_ms"]} - set(summary["candidates"])
        for row in one["shapes"]:
            ms = row["median_ms"]
            base = min((v for k, v in ms.items() if k in baselines), default=None)
            mine = ms.get(name)
            speed = (f"{row['speedup']:.3f}x [{row['range'][0]:.3f}, {row['range'][1]:.3f}]" if row["speedup"]
                     else f"none ({row['processes']} processes timed it; {'; '.join(row['missing']) or 'too few'})")
            lines.append(f"| {row['shape']} | {base:.3f} | {mine:.3f} | {speed} |" if base and mine
                         else f"| {row['shape']} | - | - | {speed} |")
        if one["geomean"] is not None:
            low, high = one["geomean_range"]
            lines.append(f"\ngeomean over the shapes: {one['geomean']:.3f}x [{low:.3f}, {high:.3f}]\n")
        else:
            lines.append(f"\ngeomean over the shapes: none ({len(one['geomean_per_process'])} processes timed "
                         f"every shape; {MIN_PROCESSES} needed)\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/kda_bench_summary.py", description=__doc__.splitlines()[0])
    parser.add_argument("benches", nargs="+", type=Path, help="gpu_kda_bench.py --json files, one per process")
    parser.add_argument("--json", type=Path, help="write the summary here too")
    args = parser.parse_args(argv)
    absent = [str(p) for p in args.benches if not p.is_file()]  # a process that wrote nothing: listed, not dropped
    summary = summarize([json.loads(p.read_text()) for p in args.benches if p.is_file()], tuple(absent))
    print(markdown(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
