"""Ping-pong assign variants at the CAKE cell through the evaluator's bench worker: verified by the gates,
then timed interleaved with flash-kmeans (and any `--also` baselines, in the same process). A table and JSON of
every variant's median against each baseline.

    python3 scripts/gpu_assign_variants.py --out "$OUT" [--max-seconds 3]
    python3 scripts/gpu_assign_variants.py --out "$OUT" --rounds 3 \
        --variants assign_pingpong.cake assign_pingpong_fused.cake assign_pingpong.cake:STAGES=3

Each variant is a shipped schedule at a param assignment, written specialized (`experiments.schedules`)
and lowered by the CUDA backend. The bench worker runs in its own process per variant, so a variant that
crashes or hangs costs its own time only; it refuses to time one that fails its gates (bf16 battery).

`--variants` names the variants (`FILE.cake[:NAME=VALUE,...]`, a file under experiments/kmeans or a path to one, such
as an evolve run's `best.cake`; default: the list below) and `--rounds` repeats the whole list, so each variant is timed in that many separate processes interleaved
with the others (round 1 all variants, then round 2 ...): two variants are compared by their speedups over the
flash-kmeans timed in the same process, median [min, max] over the rounds (`summary` in the JSON).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from cake.experiments.kmeans.workload import ASSIGN, FOLDER
from cake.experiments.schedules import write_specialized

from cake.evaluation.bench import BenchRequest, BenchTimes
from cake.evaluation.evaluator import KernelSpec, run_bench_worker

SHAPE = "cake_cell"
BASELINE = "flash_kmeans"
# (schedule file, params): the shipped ping-pong at its defaults and a few moves that change how much of a
# point tile's load is hidden (x2: double-buffered points) or how deep the centroid ring is.
VARIANTS: tuple[tuple[str, dict[str, int]], ...] = (
    ("assign_pingpong.cake", {}),
    ("assign_pingpong.cake", {"STAGES": 3}),
    ("assign_pingpong.cake", {"STAGES": 5}),
    ("assign_pingpong.cake", {"STAGES": 2}),
    ("assign_pingpong_x2.cake", {}),
    ("assign_pingpong_x2.cake", {"STAGES": 3}),
    ("assign_pingpong_x2.cake", {"BN": 64, "BK": 128, "STAGES": 2}),
    ("assign_pingpong_x2.cake", {"BN": 64, "BK": 64, "STAGES": 4}),
)
VARIANT_TIMEOUT_S = 120.0


def bench_variant(path: Path, max_seconds: float, also: tuple[str, ...] = (), *, reuse: bool = False,
                  keep: Path | None = None) -> dict[str, object]:
    """One variant gated then timed in a bench process of its own (`reuse`: on this process's bench server, as an
    evolve run's evaluations are), every sample written to `keep` when given."""
    request = BenchRequest("kmeans_assign", KernelSpec(path, "cuda").ref(), (ASSIGN.shape(SHAPE),), (BASELINE, *also),
                           max_seconds=max_seconds)
    started = time.perf_counter()
    outcome, tail = run_bench_worker(request, "cuda", timeout_s=VARIANT_TIMEOUT_S, reuse=reuse, keep=keep)
    times = outcome if isinstance(outcome, BenchTimes) else BenchTimes()
    mine = times.candidate.get(SHAPE)
    theirs = {name: times.baselines.get(name, {}).get(SHAPE) for name in (BASELINE, *also)}
    status = "timed" if mine else (outcome if isinstance(outcome, str) else times.refused or "no time")
    speedups = {name: ms / mine if mine and ms else None for name, ms in theirs.items()}
    return {"status": status, "ms": mine, "flash_kmeans_ms": theirs[BASELINE], "speedup": speedups[BASELINE],
            "baseline_ms": theirs, "speedups": speedups, "seconds": round(time.perf_counter() - started, 1),
            "tail": tail.splitlines()[-6:]}


def report_provenance() -> dict[str, object]:
    """What times the variants, as the cost fitter keys it (`scripts/cost_data.py` reads a report back as a run): the
    device, the CUDA backend's toolchain and codegen version, the bench's clock, and the shape."""
    from cake.cli.evolve import timing_provenance

    shape = ASSIGN.shape(SHAPE)
    return {**timing_provenance("cuda"), "dims": dict(shape.dim_map), "dtype": shape.ir_dtype}


def schedule_path(name: str) -> Path:
    """A shipped schedule's name under experiments/kmeans, else a path to a schedule file."""
    return FOLDER / name if (FOLDER / name).is_file() else Path(name)


def parse_variant(spec: str) -> tuple[str, dict[str, int]]:
    """`FILE.cake[:NAME=VALUE,...]` -> (file, params); a malformed spec is a usage error naming it."""
    name, _, binds = spec.partition(":")
    if not name.endswith(".cake") or not schedule_path(name).is_file():
        raise argparse.ArgumentTypeError(f"{spec!r}: {name!r} is neither a schedule file under {FOLDER} nor a path "
                                         "to one")
    params: dict[str, int] = {}
    for bind in filter(None, binds.split(",")):
        key, eq, value = bind.partition("=")
        if not eq or not value.lstrip("-").isdigit():
            raise argparse.ArgumentTypeError(f"{spec!r}: {bind!r} is not NAME=INTEGER")
        params[key] = int(value)
    return name, params


def label(name: str, params: dict[str, int]) -> str:
    return name + ("" if not params else ":" + ",".join(f"{k}={v}" for k, v in sorted(params.items())))


def summarize(rows: list[dict[str, object]], baseline: str = BASELINE) -> dict[str, dict[str, object]]:
    """Per variant: its speedups over the same process's `baseline`, median [min, max] over the rounds."""
    by_variant: dict[str, list[float]] = {}
    for row in rows:
        by_variant.setdefault(str(row["variant"]), [])
        speedup = (row.get("speedups") or {}).get(baseline, row.get("speedup") if baseline == BASELINE else None)  # type: ignore[attr-defined]
        if isinstance(speedup, float):
            by_variant[str(row["variant"])].append(speedup)
    return {name: {"rounds_timed": len(s), "median": statistics.median(s) if s else None,
                   "min": min(s, default=None), "max": max(s, default=None)} for name, s in by_variant.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=3.0, help="timing guard per variant")
    parser.add_argument("--variants", nargs="+", type=parse_variant, default=list(VARIANTS),
                        metavar="FILE.cake[:NAME=VALUE,...]", help="the variants to time (default: the list above)")
    parser.add_argument("--rounds", type=int, default=1, help="time the whole list this many times, one process each")
    parser.add_argument("--also", nargs="+", default=[], metavar="BASELINE",
                        help="more baselines timed in each variant's process (e.g. triton_assign)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    provenance = report_provenance()
    rows: list[dict[str, object]] = []
    for round_ in range(1, args.rounds + 1):
        for name, params in args.variants:
            path = write_specialized(schedule_path(name), params, args.out)
            # `file`: the specialized text that was timed (its name holds a hash of it), so a row can be read back as
            # cost-model data; two variants of one kernel name and params differ only there
            row = {"variant": label(name, params), "schedule": name, "params": params, "file": path.name,
                   "round": round_, **bench_variant(path, args.max_seconds, tuple(args.also))}
            rows.append(row)
            speed = f"{row['speedup']:.3f}x" if row.get("speedup") else "-"
            print(f"r{round_} {label(name, params):40} {row.get('ms') or '-':>10} ms  fk "
                  f"{row.get('flash_kmeans_ms') or '-'}  {speed}  {row['status']}", flush=True)
            summaries = {name: summarize(rows, name) for name in (BASELINE, *args.also)}
            (args.out / "assign_variants.json").write_text(json.dumps(
                {"provenance": provenance, "rows": rows, "summary": summaries[BASELINE],
                 "summary_by_baseline": summaries}, indent=1))
    for baseline in (BASELINE, *args.also):
        for name, s in summarize(rows, baseline).items():
            span = f"{s['median']:.3f}x [{s['min']:.3f}, {s['max']:.3f}]" if s["median"] is not None else "not timed"
            print(f"summary {name:40} over {baseline} {span} ({s['rounds_timed']} of {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
