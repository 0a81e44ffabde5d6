"""Where a call of the op's update spends its time on the H200: the host, or the GPU. Call plans on and off.

    python3 scripts/gpu_update_host.py --out "$RES/update_host.json" [--shapes large_n cake_cell k128] [--calls 200]
    TRITON_INTERPRET=1 python3 scripts/gpu_update_host.py --out /tmp/h.json --dry-run   # CPU: the plumbing only

The callable is the one scripts/gpu_update_bench.py times (the bucket table through `load_bucketed`, default the
op's own table). Each shape runs it with the generated modules' call plans off (`_K_PLANS_ON = False`: what
CAKE_TRITON_PLANS=0 sets at import; every call through the checks and Triton's JIT launch path), then on (a
call signature seen before replays its record straight through the compiled kernels; lowering/triton/module.py,
"Call plans"), and flash-kmeans 0.3.1's update beside them. Per contestant (median over --calls calls):
- host_us: the CPU time of the call itself, started with the GPU idle (a synchronize before, outside the clock):
  what a caller's thread spends issuing it;
- idle_ms: synchronize, call, synchronize on the CPU clock: a call made with nothing queued (the GPU waits for
  each launch) — what the bench's timing measures when the contestant before it synchronized;
- gpu_ms: CUDA events around each call while the GPU is held busy (`torch.cuda._sleep`) so the host runs ahead:
  the kernels alone, no host gaps.
A call is host-bound when host_us/1000 > gpu_ms. The outputs with plans on and off must be the same bits (the
replay launches what the JIT would); a difference is written to the JSON and exits 1.
Expected runtime on the H200: ~20 s for three shapes (compiles come from Triton's cache after the gates).
`--dry-run` runs on the CPU under the interpreter at a tiny fp32 shape: host_us and idle_ms on the CPU clock, no
gpu_ms, no flash-kmeans.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from cake.experiments.kmeans.update_choice import DEFAULT_TABLE, load_bucketed
from cake.experiments.kmeans.workload import UPDATE
from cake.experiments.workload import parse_shape
from cake.verifier.registry import get_contract
from cake.verifier.timing import make_inputs

DRY_SHAPE = "B=2,N=300,K=7,D=32:fp32"
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
HOLD_CYCLES = 40_000_000  # torch.cuda._sleep before the gpu_ms burst: ~20 ms at the H200's clock, > the burst's host time
BURST = 20  # calls queued behind the hold


def sync(on_gpu: bool) -> None:
    if on_gpu:
        torch.cuda.synchronize()


def host_and_idle(run: Callable[[], Any], calls: int, on_gpu: bool) -> tuple[float, float]:
    host, idle = [], []
    for _ in range(calls):
        sync(on_gpu)
        start = time.perf_counter()
        run()
        issued = time.perf_counter()
        sync(on_gpu)
        done = time.perf_counter()
        host.append((issued - start) * 1e6)
        idle.append((done - start) * 1e3)
    return statistics.median(host), statistics.median(idle)


def gpu_ms(run: Callable[[], Any]) -> float:
    torch.cuda.synchronize()
    torch.cuda._sleep(HOLD_CYCLES)
    marks = []
    for _ in range(BURST):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        marks.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in marks)


def set_plans(modules: list[Any], on: bool) -> None:
    for module in modules:
        module._K_PLANS_ON = on
        module._k_plans.clear()


def measure_shape(name: str, args: argparse.Namespace, update: Any, fk: Callable[..., Any] | None) -> dict[str, Any]:
    shape = parse_shape(name, UPDATE.gpu_shapes, "bf16")
    on_gpu = not args.dry_run
    contract = get_contract(UPDATE.contract)
    inputs = tuple(t for t in make_inputs(contract, shape.dim_map, DTYPES[shape.dtype], "cuda" if on_gpu else "cpu",
                                          seed=0) if t is not None)
    bucket = update.table.choose(shape.dim_map)
    loaded = update.kernel(bucket)
    modules = [sys.modules[loaded.fn.__module__]]
    row: dict[str, Any] = {"dims": shape.dim_map, "dtype": shape.dtype, "bucket": bucket.describe(),
                           "launches": [launch.function for launch in loaded.lowered.launches]}
    outputs = {}
    for plans in (False, True):
        set_plans(modules, plans)
        outputs[plans] = update(*inputs)  # plans on: this call records
        host_us, idle_ms = host_and_idle(lambda: update(*inputs), args.calls, on_gpu)
        entry = {"host_us": host_us, "idle_ms": idle_ms}
        if on_gpu:
            entry["gpu_ms"] = gpu_ms(lambda: update(*inputs))
        entry["plan_direct"] = bool(plans and all(p.direct for m in modules for p in m._k_plans.values()))
        row[f"ours_plans_{'on' if plans else 'off'}"] = entry
    sync(on_gpu)
    row["same_bits"] = bool(torch.equal(outputs[False].view(torch.uint8), outputs[True].view(torch.uint8)))
    if fk is not None:
        fk(*inputs)
        host_us, idle_ms = host_and_idle(lambda: fk(*inputs), args.calls, on_gpu)
        row["flash_kmeans"] = {"host_us": host_us, "idle_ms": idle_ms, "gpu_ms": gpu_ms(lambda: fk(*inputs))}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the JSON to write")
    ap.add_argument("--table", type=Path, default=DEFAULT_TABLE, help="the bucket table (default: the op's own)")
    ap.add_argument("--shapes", nargs="+", default=["large_n", "cake_cell", "k128"])
    ap.add_argument("--calls", type=int, default=200, help="calls per contestant and mode (medians)")
    ap.add_argument("--dry-run", action="store_true", help="CPU, interpreter, a tiny fp32 shape, no GPU clocks")
    args = ap.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_update_host: no CUDA device (use --dry-run on a CPU)", file=sys.stderr)
        return 2
    update = load_bucketed(str(args.table), backend="triton")
    fk = None
    if not args.dry_run:
        baseline = next(b for b in UPDATE.baselines if b.name == "flash_kmeans")
        fk = baseline.load().run
    names = [DRY_SHAPE] if args.dry_run else args.shapes
    if args.dry_run:
        args.calls = min(args.calls, 3)
    result: dict[str, Any] = {"table": str(args.table), "calls": args.calls, "dry_run": args.dry_run,
                              "device": torch.cuda.get_device_name() if not args.dry_run else "cpu",
                              "torch": torch.__version__, "shapes": {}}
    for name in names:
        result["shapes"][name] = measure_shape(name, args, update, fk)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'shape':<28} {'contestant':<16} {'host us':>9} {'idle ms':>9} {'gpu ms':>8}")
    for name, row in result["shapes"].items():
        for who in ("ours_plans_off", "ours_plans_on", "flash_kmeans"):
            if who in row:
                e = row[who]
                gpu = f"{e['gpu_ms']:8.4f}" if "gpu_ms" in e else "       -"
                print(f"{name:<28} {who:<16} {e['host_us']:9.1f} {e['idle_ms']:9.4f} {gpu}")
        print(f"{name:<28} plans on/off same bits: {row['same_bits']}; bucket {row['bucket']}; "
              f"direct launches: {row['ours_plans_on']['plan_direct']}")
    print(f"wrote {args.out}")
    return 0 if all(row["same_bits"] for row in result["shapes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
