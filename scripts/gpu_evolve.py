"""A clean-start offline evolution on the CAKE cell, on one GPU, within a wall-clock budget.

    python3 scripts/gpu_evolve.py [--minutes 9] [--backend cuda|triton] [--seed 0] [--out DIR] [--compile-workers N]
    python3 scripts/gpu_evolve.py --rate RUN_DIR      # the evaluation rate of a finished run (any machine)

Runs `cake evolve --op flash_kmeans --device cuda` (offline agent, clean start from the plain seed
schedule, fitness = measured speedup at B=32 N=65536 K=1024 D=128 bf16 over the better of flash-kmeans
0.3.1 and the plain Triton sweep's best config), then `cake report`. Writes into `--out` (default $OUT):

    gpu_evolve.json   what ran, the environment, the report's summary and best-so-far series, the best
                      schedule's text and lineage, the evaluation rate (`rate`: evaluations per minute of the
                      run, seconds per evaluation, what was compiled ahead, best so far against wall time), and
                      the evolve log's tail
    report/           report.md and the PNG plots
    best.cake         the best verified schedule

On the lent GPU machine (no network; carry `.whl`):

    source scripts/gpu/setup.sh && python3 scripts/gpu_evolve.py --minutes 9

matplotlib is not installed there: the JSON report is written, and the PNGs come from `cake report OUT/run`
on any machine afterwards (the run directory is under OUT).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

# The loop starts no evaluation once its wall budget is spent (it checks before each one, not each turn), so what runs
# past it is the evaluation in flight, its confirmation and re-timing if it is a new best, and the report. Over the
# seven committed 10-minute seeds of sessions 19-21 that was 13-33 s (wall 433-453 s against a loop budget of 420), so
# 150 s of slack (set when the loop checked only between turns: session 8's turn of 4 outlived 90 s) left about 150 s
# of every seed unused. 60 s keeps twice the worst overrun seen; the report has its 30 s besides.
TURN_SLACK_S = 60.0


def evaluation_rate(run_dir: Path) -> dict[str, object]:
    """How fast a run evaluated: evaluations per minute from its start to its last evaluation, each evaluation's
    seconds (on its device, compiles ahead excluded), what was compiled ahead (`ahead` events), and the best
    measured fitness so far against wall time."""
    import statistics

    from cake.runs.store import RunStore

    store = RunStore.open_read_only(run_dir)
    starts = [at for at, _, _ in store.events("start")]
    finished = store.evaluation_times()
    if not starts or not finished:
        return {"evaluations": len(finished), "evaluations_per_minute": None}
    start = starts[0]
    rows = {c.id: c for c in store.candidates() if c.evaluation is not None}
    span_s = max(finished.values()) - start
    best: float | None = None
    curve: list[dict[str, object]] = []
    for cid, at in sorted(finished.items(), key=lambda kv: kv[1]):
        fitness = rows[cid].fitness
        if fitness is not None and (best is None or fitness > best):
            best = fitness
        curve.append({"t_s": round(at - start, 1), "evaluations": len(curve) + 1, "best": best})
    seconds = [c.evaluation.seconds for c in rows.values() if c.evaluation is not None]
    stages: dict[str, list[float]] = {}  # the bench worker's steps (cake.evaluation.bench: BenchRun.stages)
    outside: list[float] = []  # an evaluation's seconds outside them: worker starts, the other dtypes' gates
    for row in rows.values():
        kept = run_dir / "candidates" / f"{row.ir_hash}.bench.json"
        laps = json.loads(kept.read_text()).get("stages_s", {}) if kept.is_file() else {}
        for name, lap in laps.items():
            stages.setdefault(name, []).append(lap)
        if laps and row.evaluation is not None:
            outside.append(row.evaluation.seconds - sum(laps.values()))
    ahead = [json.loads(d) for _, _, d in store.events("ahead")]
    entries = [e for a in ahead if a.get("report") for e in a["report"]["entries"]]
    built = [e["seconds"] for e in entries if e["status"] == "built"]
    return {
        "evaluations": len(finished), "span_s": round(span_s, 1),
        "evaluations_per_minute": round(60.0 * len(finished) / span_s, 2) if span_s > 0 else None,
        "evaluation_s_median": round(statistics.median(seconds), 1),
        "evaluation_s": [round(x, 1) for x in seconds],
        "bench_stages_s_median": {k: round(statistics.median(v), 2) for k, v in sorted(stages.items())},
        "outside_bench_stages_s_median": round(statistics.median(outside), 2) if outside else None,
        "ahead": {"compiled_ahead": len(ahead),
                  "worker_s_median": round(statistics.median(a["seconds"] for a in ahead), 1) if ahead else None,
                  "specializations": {k: sum(e["status"] == k for e in entries)
                                      for k in ("built", "cached", "refused", "failed")},
                  "nvcc_s_median": round(statistics.median(built), 2) if built else None,
                  "problems": [a["problem"] for a in ahead if a.get("problem")]},
        "best_vs_time": curve,
    }


def rate_line(rate: dict[str, object]) -> str:
    if rate.get("evaluations_per_minute") is None:
        return f"rate: {rate['evaluations']} evaluations, no rate"
    return (f"rate: {rate['evaluations']} evaluations in {rate['span_s']} s = {rate['evaluations_per_minute']}/min; "
            f"median {rate['evaluation_s_median']} s an evaluation (bench steps {rate['bench_stages_s_median']}, "
            f"outside them {rate['outside_bench_stages_s_median']} s); compiled ahead {rate['ahead']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=9.0, help="total wall-clock budget for evolve + report")
    parser.add_argument("--backend", choices=("triton", "cuda"), default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--proposals", type=int, default=24)
    parser.add_argument("--evals-per-turn", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_evolve_out")))
    parser.add_argument("--compile-workers", type=int, default=None,
                        help="cake evolve --compile-workers (default: cake's, the CPUs less 2 per GPU; 0: off)")
    parser.add_argument("--disable-operator", action="append", default=[], metavar="NAME",
                        help="cake evolve --disable-operator (repeatable)")
    parser.add_argument("--no-reuse-bench-process", action="store_true",
                        help="cake evolve --no-reuse-bench-process: a one-shot bench process per evaluation")
    parser.add_argument("--rate", type=Path, default=None, metavar="RUN_DIR",
                        help="print the evaluation rate of a finished run directory as JSON, and exit")
    args = parser.parse_args()
    if args.rate is not None:
        rate = evaluation_rate(args.rate)
        print(json.dumps({k: v for k, v in rate.items() if k != "best_vs_time"}, indent=1))
        print(rate_line(rate))
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    budget_s = args.minutes * 60.0
    command = [sys.executable, "-m", "cake", "evolve", "--op", "flash_kmeans", "--device", "cuda",
               "--backend", args.backend, "--seed", str(args.seed), "--turns", "1000",
               "--proposals", str(args.proposals), "--evals-per-turn", str(args.evals_per_turn),
               "--wall-time", str(max(60.0, budget_s - TURN_SLACK_S - 30.0)), "--out", str(run_dir)]
    if args.compile_workers is not None:
        command += ["--compile-workers", str(args.compile_workers)]
    for name in args.disable_operator:
        command += ["--disable-operator", name]
    if args.no_reuse_bench_process:
        command += ["--no-reuse-bench-process"]
    started = time.monotonic()
    log_path = args.out / "evolve.log"
    with log_path.open("w") as log:
        # Its own session, so a timeout takes the evolve process and the bench it is running.
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode: int | str = proc.wait(timeout=budget_s - 20.0)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            returncode = "timeout (the run directory holds every finished evaluation; cake report still works)"
    wall_s = time.monotonic() - started

    result: dict[str, object] = {"command": command, "returncode": returncode, "wall_s": wall_s,
                                 "env": _environment()}
    if (run_dir / "run.sqlite").exists():
        report_proc = subprocess.run([sys.executable, "-m", "cake", "report", str(run_dir), "--json"],
                                     capture_output=True, text=True, timeout=120)
        subprocess.run([sys.executable, "-m", "cake", "report", str(run_dir), "-o", str(args.out / "report")],
                       capture_output=True, text=True, timeout=120)
        if report_proc.returncode == 0:
            report = json.loads(report_proc.stdout)
            result["summary"] = report["summary"]
            result["best_series"] = report["best_series"]
            result["lineage"] = report["lineage"]
            result["verdicts_per_turn"] = [{k: t[k] for k in ("turn", "counts", "rejections")}
                                           for t in report["verdicts_per_turn"]]
            best = report["summary"]["best"]
            if best:
                text = (run_dir / best["path"]).read_text()
                (args.out / "best.cake").write_text(text)
                result["best_schedule"] = text
        else:
            result["report_error"] = report_proc.stderr[-4000:]
        result["rate"] = evaluation_rate(run_dir)
    result["evolve_log_tail"] = log_path.read_text().splitlines()[-60:]
    (args.out / "gpu_evolve.json").write_text(json.dumps(result, indent=2) + "\n")
    summary = result.get("summary")
    print(json.dumps(summary, indent=2) if summary else "no report", flush=True)
    if "rate" in result:
        print(rate_line(result["rate"]))  # type: ignore[arg-type]
    print(f"wrote {args.out / 'gpu_evolve.json'} ({wall_s:.0f} s)")
    return 0


def _environment() -> dict[str, object]:
    env: dict[str, object] = {"python": platform.python_version()}
    try:
        import torch
        import triton

        env.update(torch=torch.__version__, triton=triton.__version__,
                   gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
    except ImportError as missing:
        env["import_error"] = str(missing)
    try:
        import flash_kmeans

        env["flash_kmeans"] = getattr(flash_kmeans, "__version__", "?")
    except ImportError:
        env["flash_kmeans"] = None
    return env


if __name__ == "__main__":
    raise SystemExit(main())
