"""Choose each bucket's update configuration from measured variants: reads the JSON files
scripts/gpu_update_sorted.py wrote (one per shape), and writes a bucket table (experiments/kmeans/update_choice.py)
whose buckets name, per bucket, the variant with the best worst-case speedup over flash-kmeans across the
measured shapes that fall in that bucket.

    python3 scripts/gpu_update_choose.py --measured $RES/small/*.json $RES/large/*.json --out $RES/update_buckets.json

A variant competes in a bucket only when it passed its quick check and was timed at every measured shape of
the bucket (a variant missing at one of them cannot be judged there); a bucket no measured shape falls in
keeps the template's configuration, and says so in the table's evidence. Runs on the CPU (it reads JSON):
nothing here needs a GPU. Prints a table per bucket; exit 1 when a measured bucket has no eligible variant
(its template configuration is kept and the table's evidence says so).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.experiments.kmeans.update_choice import (
    DEFAULT_TABLE,
    Bucket,
    UpdateTable,
    load_table,
    parse_table,
    table_json,
)

BASELINE = "flash_kmeans"


@dataclass(frozen=True)
class Measured:
    shape: str
    dims: dict[str, int]
    medians_ms: dict[str, float]  # variant or baseline -> median over its timed calls
    variants: dict[str, dict[str, Any]]  # variant -> {"schedule", "params", "verified"}


def read_measured(path: Path) -> Measured:
    data = json.loads(path.read_text())
    if "samples" not in data:
        raise SystemExit(f"gpu_update_choose: {path} has no timings (a --dry-run file?); nothing to choose from")
    medians = {name: statistics.median(s["times_ms"]) for name, s in data["samples"].items()
               if s.get("failure") is None and s["times_ms"]}
    return Measured(data["shape"], dict(data["dims"]), medians, dict(data["variants"]))


def speedups(bucket_shapes: list[Measured]) -> dict[str, list[float]]:
    """variant -> flash-kmeans / variant at each shape, for the variants eligible at every shape."""
    eligible: set[str] | None = None
    for m in bucket_shapes:
        here = {v for v, row in m.variants.items() if row["verified"] and v in m.medians_ms}
        if BASELINE not in m.medians_ms:
            here = set()
        eligible = here if eligible is None else eligible & here
    return {v: [m.medians_ms[BASELINE] / m.medians_ms[v] for m in bucket_shapes] for v in sorted(eligible or ())}


def bucket_of(variant: dict[str, Any], template: Bucket) -> Bucket:
    params = tuple(sorted((str(k), int(v)) for k, v in variant["params"].items()))
    return Bucket(template.name, template.at_least, str(variant["schedule"]), params)


def choose(template: UpdateTable, measured: Sequence[Measured]) -> tuple[UpdateTable, list[str], bool]:
    """(the chosen table, one evidence line per bucket, whether every measured bucket had an eligible variant)."""
    chosen: list[Bucket] = []
    lines: list[str] = []
    complete = True
    for bucket in template.buckets:
        here = [m for m in measured if template.choose(m.dims).name == bucket.name]
        if not here:
            chosen.append(bucket)
            lines.append(f"{bucket.name}: not measured here; kept {bucket.describe()}")
            continue
        table = speedups(here)
        names = ", ".join(m.shape for m in here)
        if not table:
            complete = False
            chosen.append(bucket)
            lines.append(f"{bucket.name}: no variant passed and was timed at every one of {names}; kept "
                         f"{bucket.describe()}")
            continue
        best = max(table, key=lambda v: (min(table[v]), v))
        pick = bucket_of(here[0].variants[best], bucket)
        chosen.append(pick)
        shown = "; ".join(f"{v} " + " ".join(f"{s:.3f}x" for s in table[v]) for v in table)
        lines.append(f"{bucket.name} (measured at {names}): {best} = {pick.describe()}, best worst-case "
                     f"flash-kmeans/ours {min(table[best]):.3f}x [{shown}]")
        print(f"\n{bucket.name}: flash-kmeans / ours (median of one process) at {names}")
        for v, row in sorted(table.items(), key=lambda item: -min(item[1])):
            print(f"  {v:24s} " + " ".join(f"{s:7.3f}x" for s in row) + ("   <- chosen" if v == best else ""))
    return UpdateTable(template.path, tuple(chosen), template.evidence), lines, complete


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", type=Path, nargs="+", required=True, help="gpu_update_sorted.py JSON files")
    ap.add_argument("--template", type=Path, default=DEFAULT_TABLE, help="the bucket table whose rule is kept")
    ap.add_argument("--out", type=Path, required=True, help="the chosen table (JSON)")
    args = ap.parse_args(argv)
    template = load_table(args.template)
    # A measuring stage that ran out of time leaves fewer files (or an unexpanded shell glob): judge what exists.
    found = [p for p in args.measured if p.is_file()]
    for p in sorted(set(args.measured) - set(found)):
        print(f"gpu_update_choose: {p} does not exist; skipped", file=sys.stderr)
    if not found:
        print("gpu_update_choose: no measurement to choose from; no table written", file=sys.stderr)
        return 2
    measured = [read_measured(p) for p in found]
    table, lines, complete = choose(template, measured)
    data = table_json(table)
    data["evidence"] = "chosen by scripts/gpu_update_choose.py from " + ", ".join(p.name for p in found) \
        + ": " + " | ".join(lines) + f" || the template's evidence ({args.template.name}): {template.evidence}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    parse_table(data, args.out)  # the written table loads
    print("\n" + "\n".join(lines))
    print(f"wrote {args.out}")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
