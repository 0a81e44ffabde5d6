"""The contract battery on lowered schedules, gate by gate, with each gate's wall time: where verification
time goes on a GPU, and whether each schedule passes.

    python3 scripts/gpu_verify_timing.py --out "$OUT" \
        --schedule experiments/kmeans/assign_plain.cake:triton \
        --schedule experiments/kmeans/assign_pingpong.cake:cuda:sm_90a

Each `--schedule FILE:BACKEND[:ARCH]` is lowered, loaded and run through every gate in this process (no
worker isolation: run it under `timeout`), in every dtype its contract defines unless `--dtypes` narrows
them. Prints one table per schedule (gate, status, cases, seconds, reason) and writes
`verify_timing.json` with the same rows and each schedule's verdict (`Verdict.of`, which also judges the
schedule's shape refusals).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from cake.lowering.runtime import ARCH_ENV, BACKEND_ENV, load_schedule, schedule_op
from cake.verifier.battery import make_context, run_gate_in
from cake.verifier.gates import GATE_ORDER
from cake.verifier.registry import get_contract
from cake.verifier.results import Verdict

REASON_WIDTH = 110


def run_one(spec: str, dtypes: list[str] | None, seed: int, device: str) -> dict[str, object]:
    path, backend, *rest = spec.split(":")
    # The runtime's loader reads the backend and target from the environment, as `cake verify` does.
    os.environ[BACKEND_ENV] = backend
    if rest:
        os.environ[ARCH_ENV] = rest[0]
    else:
        os.environ.pop(ARCH_ENV, None)
    op = schedule_op(path)
    started = time.perf_counter()
    kernel = load_schedule(path)
    load_s = time.perf_counter() - started
    ctx = make_context(get_contract(op), kernel, device=device, dtypes=dtypes, seed=seed, interpreter=device == "cpu")
    rows, results = [], []
    print(f"\n== {spec} ({op}) — lowered and loaded in {load_s:.1f} s")
    for gate_id in GATE_ORDER:
        t0 = time.perf_counter()
        result = run_gate_in(ctx, gate_id, stop_at_first=True)
        seconds = time.perf_counter() - t0
        results.append(result)
        rows.append({"gate": gate_id, "status": result.status.value, "cases": result.cases_run,
                     "refused": result.refused_cases, "seconds": round(seconds, 2), "reason": result.reason})
        print(f"{gate_id:8} {result.status.value:14} cases={result.cases_run:3} refused={result.refused_cases:2} "
              f"{seconds:7.2f}s  {result.reason[:REASON_WIDTH]}", flush=True)
    verdict = Verdict.of(op, tuple(results))
    total = sum(float(r["seconds"]) for r in rows)  # type: ignore[arg-type]
    print(f"-> {'PASS' if verdict.passed else 'FAIL'} in {total:.1f} s of gates")
    return {"schedule": spec, "op": op, "load_s": round(load_s, 2), "gates": rows, "passed": verdict.passed,
            "verdict": json.loads(verdict.to_json())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedule", action="append", required=True, metavar="FILE:BACKEND[:ARCH]")
    parser.add_argument("--dtypes", nargs="+")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: under TRITON_INTERPRET=1")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = []
    target = args.out / "verify_timing.json"
    for spec in args.schedule:
        report.append(run_one(spec, args.dtypes, args.seed, args.device))
        target.write_text(json.dumps(report, indent=1))  # after each schedule: a timeout keeps the finished ones


if __name__ == "__main__":
    main()
