"""What the cost model predicts for a pass's child of a schedule at the kmeans cell, against the schedule itself:
the prediction the search ranks with (factors and correction), the factored analytic time alone, and the terms.

    python3 scripts/pass_predictions.py SCHEDULE.cake --pass cluster_multicast [--param CLUSTER=2,4] [--json OUT]

SCHEDULE is a path or a name under experiments/kmeans; dims B=32 N=65536 K=1024 D=128, bf16, the CUDA backend's
current calibration. A model's view, for finding where it disagrees with itself (the correction extrapolating beyond
its training timings), never a timing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from cake.ir import cost
from cake.ir.nodes import Kernel
from cake.ir.parser import parse
from cake.ir.transforms.bind_params import bind_params

ROOT = Path(__file__).resolve().parents[1]
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}
TERMS = ("tensor_s", "cuda_s", "smem_s", "l2_s", "hbm_s", "latency_s", "sync_s", "chain_s")


def row(label: str, kernel: Kernel) -> dict[str, object]:
    p = cost.predict(kernel, dims=CELL, backend="cuda")
    slowest = max(p.launches, key=lambda lp: lp.time_s)
    return {"variant": label, "predicted_ms": p.time_s * 1e3, "analytic_ms": p.analytic_s * 1e3,
            "terms_ms": {t: getattr(slowest.terms, t) * 1e3 for t in TERMS}, "launch": slowest.launch}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("schedule")
    ap.add_argument("--pass", dest="pass_name", required=True, help="a module of cake.ir.transforms")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=V,V", help="bind the child's param to each")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    path = Path(args.schedule) if Path(args.schedule).is_file() else ROOT / "experiments" / "kmeans" / args.schedule
    kernel = parse(path.read_text(), path.name)
    child = getattr(importlib.import_module(f"cake.ir.transforms.{args.pass_name}"), args.pass_name)(kernel)
    if child is None:
        raise SystemExit(f"{args.pass_name} does not apply to {path}")
    rows = [row("parent", kernel)]
    bindings = [(name, [int(v) for v in values.split(",")]) for name, values in (p.split("=", 1) for p in args.param)]
    if not bindings:
        rows.append(row("child", child))
    for name, values in bindings:
        rows.extend(row(f"child {name}={v}", bind_params(child, {name: v})) for v in values)
    for r in rows:
        terms = " ".join(f"{k.removesuffix('_s')} {v:.3f}" for k, v in r["terms_ms"].items())  # type: ignore[attr-defined]
        print(f"{r['variant']:18} predicted {r['predicted_ms']:.3f} ms  analytic {r['analytic_ms']:.3f} ms  | {terms}")
    if args.json:
        args.json.write_text(json.dumps({"schedule": str(path), "pass": args.pass_name, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
