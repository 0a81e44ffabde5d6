"""The contract battery on lowered schedules, gate by gate, with each gate's wall time split into compilation
and checking: where verification time goes on a GPU, and whether each schedule passes.

    python3 scripts/gpu_verify_timing.py --out "$OUT" \
        --schedule experiments/kmeans/assign_plain.cake:triton \
        --schedule experiments/kmeans/assign_pingpong.cake:cuda:sm_90a

Each `--schedule FILE:BACKEND[:ARCH]` is lowered, loaded and run through every gate in this process (no
worker isolation: run it under `timeout`), in every dtype its contract defines unless `--dtypes` narrows
them. The battery runs twice (`--passes 2`, the default): the first (cold) pass compiles every specialization
it meets (Triton JIT per constexpr/shape class, NVRTC per static dim) while checking; the second (warm) pass
meets only compiled code, so its times are the checking alone, and cold - warm is the compilation. Both passes
pay the fp64 reference (the expected-output cache is cleared before each). Prints one table per schedule
(gate, status, cases, cold s, warm s, compile s, reason) and the totals — lowering+load, compile, check — and
writes `verify_timing.json` with the same rows and each schedule's verdict (`Verdict.of`, which also judges
the schedule's shape refusals).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from cake.lowering.runtime import ARCH_ENV, BACKEND_ENV, load_schedule, schedule_op
from cake.verifier.battery import make_context, run_gate_in
from cake.verifier.expected import clear_cache
from cake.verifier.gates import GATE_ORDER, GateContext
from cake.verifier.registry import get_contract
from cake.verifier.results import GateResult, Verdict

REASON_WIDTH = 110


def _battery(ctx: GateContext) -> list[tuple[GateResult, float]]:
    clear_cache()  # every pass pays the fp64 reference: cold - warm is compilation only
    out = []
    for gate_id in GATE_ORDER:
        t0 = time.perf_counter()
        result = run_gate_in(ctx, gate_id, stop_at_first=True)
        if ctx.device.startswith("cuda"):
            torch.cuda.synchronize()
        out.append((result, time.perf_counter() - t0))
    return out


def run_one(spec: str, dtypes: list[str] | None, seed: int, device: str, passes: int) -> dict[str, object]:
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
    print(f"\n== {spec} ({op}) — lowered and loaded in {load_s:.1f} s")
    runs = [_battery(ctx) for _ in range(passes)]
    cold = runs[0]
    warm = runs[-1] if passes > 1 else None
    rows = []
    print(f"{'gate':8} {'status':14} {'cases':>5} {'refused':>7} {'cold s':>7} {'warm s':>7} {'compile s':>9}  reason")
    for i, (result, cold_s) in enumerate(cold):
        warm_s = warm[i][1] if warm is not None else None
        compile_s = max(0.0, cold_s - warm_s) if warm_s is not None else None
        same = warm is None or warm[i][0].status is result.status
        rows.append({"gate": result.gate_id, "status": result.status.value, "cases": result.cases_run,
                     "refused": result.refused_cases, "seconds": round(cold_s, 2),
                     "warm_seconds": None if warm_s is None else round(warm_s, 2),
                     "compile_seconds": None if compile_s is None else round(compile_s, 2),
                     "warm_status": None if warm is None else warm[i][0].status.value, "reason": result.reason})
        flag = "" if same else f" [warm pass: {warm[i][0].status.value}]"  # type: ignore[index]
        print(f"{result.gate_id:8} {result.status.value:14} {result.cases_run:5} {result.refused_cases:7} {cold_s:7.2f} "
              f"{_f(warm_s):>7} {_f(compile_s):>9}  {result.reason[:REASON_WIDTH]}{flag}", flush=True)
    verdict = Verdict.of(op, tuple(r for r, _ in cold))
    cold_total = sum(s for _, s in cold)
    check_total = sum(s for _, s in warm) if warm is not None else None
    compile_total = load_s + (max(0.0, cold_total - check_total) if check_total is not None else 0.0)
    summary = f"lowering+load {load_s:.1f} s, cold battery (compile + check) {cold_total:.1f} s"
    if check_total is not None:
        summary += (f", warm battery (check only) {check_total:.1f} s, compile ~ max(0, cold - warm) + load = "
                    f"{compile_total:.1f} s")
    print(f"-> {'PASS' if verdict.passed else 'FAIL'}; {summary}")
    return {"schedule": spec, "op": op, "load_s": round(load_s, 2), "cold_battery_s": round(cold_total, 2),
            "check_s": None if check_total is None else round(check_total, 2),
            "compile_s": round(compile_total, 2) if check_total is not None else None,
            "gates": rows, "passed": verdict.passed, "verdict": json.loads(verdict.to_json())}


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedule", action="append", required=True, metavar="FILE:BACKEND[:ARCH]")
    parser.add_argument("--dtypes", nargs="+")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: under TRITON_INTERPRET=1")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--passes", type=int, choices=(1, 2), default=2,
                        help="2: a cold and a warm battery, so compilation and checking are reported apart")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = []
    target = args.out / "verify_timing.json"
    for spec in args.schedule:
        report.append(run_one(spec, args.dtypes, args.seed, args.device, args.passes))
        target.write_text(json.dumps(report, indent=1))  # after each schedule: a timeout keeps the finished ones


if __name__ == "__main__":
    main()
