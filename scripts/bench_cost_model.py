"""How well does the cost model rank assign schedules on this GPU? Measures it, and fits the calibration.

    python3 scripts/bench_cost_model.py --out "$OUT"            # H200: about 7 minutes of GPU time

1. Enumerate assign schedules: every param assignment of `assign_plain.cake` the static checker accepts
   (Triton backend, CAKE cell) and the cost model can fit on an SM, plus a few assignments of each
   reference schedule that loads here (seeded order, so a cut by the time guard is a fair sample).
2. Phase A (a thread pool, so compiles overlap): load each, check it against the fp64 reference at a tail
   shape (B=3 N=1000 K=97, all of it) and warm it at a shape with the cell's specialization (B=16 N=2048
   K=1024 D=128, sampled check). Wrong or uncompilable schedules are recorded and dropped.
3. Phase B (serial): time each survivor at the cell with the timing protocol (cold L2, two rotated input
   sets, warm-up, median of few reps, sampled re-check after timing).
4. Spearman rho and top-k recall of the uncalibrated model; fit factors (in-sample rho, and 2-fold rho: fit
   on one half, rank the other); write a JSON report to --out.

A time guard stops enumerating before --budget-s (default 420 s), counted from the start of the script.
The factors it reports mix backends (the plain schedule on Triton, the references on CUDA) and are a quick look,
not a calibration: `scripts/fit_cost_model.py` fits and stores one per backend, held out by run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from cake.experiments.kmeans import shapes
from cake.experiments.kmeans.workload import ASSIGN
from cake.experiments.schedules import load_any_backend, params_tag, valid_assignments, write_specialized
from cake.ir.cost import CostError, Prediction, predict
from cake.ir.cost_calibration import (
    Factors,
    Fit,
    fit_factors_to,
    spearman,
    toolchain_id,
    top_k_recall,
)
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.verifier.registry import get_contract
from cake.verifier.runner import kernel_errors
from cake.verifier.timing import (
    Contestant,
    CudaClock,
    TimingConfig,
    Verification,
    make_inputs,
    measure,
    spot_check,
)

from cake.diagnostics import DiagnosticError

TAIL = {"B": 3, "N": 1000, "K": 97, "D": 128}
WARM = {"B": 16, "N": 2048, "K": 1024, "D": 128}
REFERENCE_VARIANTS = 12  # assignments tried per reference schedule
TIMING = TimingConfig(warmup_calls=2, min_reps=5, max_reps=15, max_wall_s=3.0)


@dataclass
class Entry:
    schedule: str
    params: dict[str, int]
    path: Path
    prediction: Prediction | None = None
    kernel: Any = None
    status: str = "pending"
    samples: tuple[float, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def measured_ms(self) -> float | None:
        return sorted(self.samples)[len(self.samples) // 2] if self.samples else None


def enumerate_entries(seed: int) -> list[Entry]:
    dims = shapes.CAKE_CELL.dim_map
    entries: list[Entry] = []
    rng = random.Random(seed)
    sources = [(p, None) for p in ASSIGN.seed_paths()] + [(p, REFERENCE_VARIANTS) for p in ASSIGN.reference_paths()]
    for path, cap in sources:
        if not path.is_file():
            continue
        kernel = parse(path.read_text(), str(path))
        backend = "triton" if path.name == "assign_plain.cake" else "cuda"
        found = []
        for params in valid_assignments(kernel, arch="sm_90a", backend=backend, dims=dims):
            try:
                prediction = predict(kernel, dims=dims, dtype=DType.BF16, params=params, factors=Factors())
            except CostError:
                continue  # does not fit an SM: it would not compile
            found.append(Entry(path.name, params, write_specialized(path, params), prediction))
        rng.shuffle(found)
        entries += found[:cap] if cap else found
    rng.shuffle(entries)
    return entries


def phase_a(entry: Entry) -> Entry:
    """Load, check at a tail shape, warm at the cell's specialization. Runs in a worker thread."""
    contract = get_contract("kmeans_assign")
    try:
        backend, entry.kernel = load_any_backend(entry.path)
        entry.extra["backend"] = backend
        tail = make_inputs(contract, TAIL, torch.bfloat16, "cuda", seed=11)
        out = entry.kernel(*tail)
        torch.cuda.synchronize()
        reason = spot_check(contract, torch.bfloat16, {})(tail, (out,) if torch.is_tensor(out) else tuple(out))
        if reason is None:
            warm = make_inputs(contract, WARM, torch.bfloat16, "cuda", seed=12)
            out = entry.kernel(*warm)
            torch.cuda.synchronize()
            reason = spot_check(contract, torch.bfloat16, {"B": 1, "N": 64})(
                warm, (out,) if torch.is_tensor(out) else tuple(out))
        entry.status = "verified" if reason is None else f"wrong: {reason}"
    except (DiagnosticError, *kernel_errors()) as error:  # the one boundary: a failed compile is a status
        entry.status = f"failed to load/compile: {type(error).__name__}: {str(error)[:200]}"
    if entry.status != "verified":
        entry.kernel = None
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=420.0, help="stop enumerating past this (wall clock)")
    parser.add_argument("--compile-workers", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if not torch.cuda.is_available():
        print("bench_cost_model: no CUDA device; nothing was timed", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    clock = CudaClock()
    device = clock.device_spec
    assert device is not None, f"{clock.device_name} is not in cake.arch"
    toolchain = toolchain_id()
    entries = enumerate_entries(args.seed)
    print(f"{len(entries)} candidate schedules; budget {args.budget_s:.0f} s", flush=True)

    # Phase A: compile + verify in a pool, submitting while the budget allows (~55% of it).
    a_budget = 0.55 * args.budget_s
    done: list[Entry] = []
    with ThreadPoolExecutor(max_workers=args.compile_workers) as pool:
        futures = []
        for entry in entries:
            if time.perf_counter() - started > a_budget:
                entry.status = "not reached (time guard)"
                continue
            futures.append(pool.submit(phase_a, entry))
            while sum(not f.done() for f in futures) >= 2 * args.compile_workers:
                time.sleep(0.05)
        done = [f.result() for f in futures]
    verified = [e for e in done if e.status == "verified"]
    print(f"phase A: {len(verified)} verified of {len(done)} loaded in {time.perf_counter() - started:.0f} s", flush=True)

    # Phase B: time at the cell, serially, with the protocol.
    contract = get_contract("kmeans_assign")
    cell = shapes.CAKE_CELL.dim_map
    sets = [make_inputs(contract, cell, torch.bfloat16, "cuda", seed=100 + i) for i in range(2)]
    check = spot_check(contract, torch.bfloat16, {"B": 1, "N": 128})
    per_entry = 1.0
    for entry in verified:
        elapsed = time.perf_counter() - started
        if elapsed + 2 * per_entry > args.budget_s:
            entry.status = "verified, not timed (time guard)"
            continue
        t0 = time.perf_counter()
        contestant = Contestant(f"{entry.schedule}:{params_tag(entry.params)}", entry.kernel,
                                verification=Verification(True, "quick check", "fp64 at a tail shape and sampled at the cell"))
        (samples,) = measure([contestant], sets, clock, check, TIMING)
        entry.samples = samples.times_ms
        entry.status = "timed" if samples.ok else (samples.failure or "not timed")
        per_entry = 0.7 * per_entry + 0.3 * (time.perf_counter() - t0)

    baseline = time_flash_kmeans(sets, clock, check)
    report = analyse([e for e in done if e.status == "timed"])
    report.update({"device": clock.device_name, "toolchain": toolchain, "elapsed_s": time.perf_counter() - started,
                   "candidates": len(entries), "loaded": len(done), "verified": len(verified),
                   "flash_kmeans_cell_ms": baseline,
                   "entries": [entry_json(e) for e in entries]})
    (args.out / "bench_cost_model.json").write_text(json.dumps(report, indent=2) + "\n")
    print_table(entries, report)
    return 0


def time_flash_kmeans(sets: list[tuple[Any, ...]], clock: CudaClock, check: Any) -> float | None:
    baseline = ASSIGN.baseline("flash_kmeans")
    from cake.experiments.workload import BaselineUnavailable

    try:
        prepared = baseline.load()
    except BaselineUnavailable as why:
        print(f"flash-kmeans baseline: {why}")
        return None
    (samples,) = measure([Contestant("flash_kmeans", prepared.run, prepared.prepared, candidate=False)], sets, clock,
                         check, TIMING)
    return samples.median_ms if samples.ok else None


def analyse(timed: list[Entry]) -> dict[str, Any]:
    if len(timed) < 4:
        return {"timed": len(timed), "note": "too few timed schedules to rank"}
    measured = [e.measured_ms for e in timed]
    assert all(m is not None for m in measured)
    meas: list[float] = [float(m) for m in measured]  # type: ignore[arg-type]
    preds = [e.prediction for e in timed]
    assert all(p is not None for p in preds)
    prior = [p.retimed(Factors()) for p in preds]  # type: ignore[union-attr]

    def fit_of(subset: list[int]) -> Fit:
        return fit_factors_to([preds[i] for i in subset], [meas[i] * 1e-3 for i in subset])

    everyone = list(range(len(timed)))
    fit = fit_of(everyone)  # predictions are seconds, meas ms
    factors = fit.factors
    if fit.warning():
        print(f"WARNING: {fit.warning()}", flush=True)
    fitted = [p.retimed(factors) for p in preds]  # type: ignore[union-attr]
    rng = random.Random(1)
    order = everyone[:]
    rng.shuffle(order)
    half_a, half_b = order[: len(order) // 2], order[len(order) // 2:]
    cross = []
    for fit_on, test_on in ((half_a, half_b), (half_b, half_a)):
        f = fit_of(fit_on).factors
        cross.append(spearman([preds[i].retimed(f) for i in test_on], [meas[i] for i in test_on]))  # type: ignore[union-attr]
    for e, p, q in zip(timed, prior, fitted, strict=True):
        e.extra.update({"predicted_prior_ms": p * 1e3, "predicted_calibrated_ms": q * 1e3})
    rho_prior, rho_fit = spearman(prior, meas), spearman(fitted, meas)
    return {"timed": len(timed), "spearman_prior": rho_prior, "spearman_calibrated_in_sample": rho_fit,
            "spearman_calibrated_2fold": cross, "top5_recall_prior": top_k_recall(prior, meas, 5),
            "top10_recall_prior": top_k_recall(prior, meas, 10), "top5_recall_calibrated": top_k_recall(fitted, meas, 5),
            "top10_recall_calibrated": top_k_recall(fitted, meas, 10), "factors": factors.to_json(),
            "factors_at_bound": list(fit.at_bound)}


def entry_json(e: Entry) -> dict[str, object]:
    p = e.prediction
    return {"schedule": e.schedule, "params": e.params, "status": e.status, "measured_ms": e.measured_ms,
            "reps": len(e.samples), "predicted_bound": p.bound.name if p else None, **e.extra}


def print_table(entries: list[Entry], report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    timed = sorted((e for e in entries if e.measured_ms is not None), key=lambda e: e.measured_ms or 0.0)
    table = Table(title=f"assign schedules at the CAKE cell · {report.get('device')}")
    for column in ("#", "schedule", "params", "measured ms", "prior ms", "calibrated ms", "bound"):
        table.add_column(column)
    for i, e in enumerate(timed, 1):
        table.add_row(str(i), e.schedule, params_tag(e.params), f"{e.measured_ms:.4f}",
                      f"{e.extra.get('predicted_prior_ms', float('nan')):.4f}",
                      f"{e.extra.get('predicted_calibrated_ms', float('nan')):.4f}",
                      e.prediction.bound.name if e.prediction else "-")
    console = Console(width=160)
    console.print(table)
    statuses: dict[str, int] = {}
    for e in entries:
        key = e.status.split(":")[0]
        statuses[key] = statuses.get(key, 0) + 1
    console.print(f"statuses: {statuses}")
    summary = {k: v for k, v in report.items() if k not in ("entries",)}
    console.print_json(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
