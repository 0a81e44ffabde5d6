"""What a re-timing costs in a one-shot bench worker against a fresh process started ahead for it
(`cake.evaluation.bench_server.FreshBenchServers`), on this GPU: the wall time of `ScheduleEvaluator.retime` for one
schedule, the two ways alternated, each re-timing a process that ran no kernel before. The first call (started
ahead, with none ready: it starts one, gates the schedule into a fresh verdict cache and prepares the next) is the
warm-up and is not counted.

    python3 scripts/gpu_retime_start.py --rounds 3 --out "$OUT/retime_start.json"
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from cake.evaluation.evaluator import EvalSettings, ScheduleEvaluator
from cake.evaluation.protocol import EvalJob

ROOT = Path(__file__).resolve().parents[1]
SCHEDULE = ROOT / "experiments" / "kmeans" / "assign_pingpong.cake"
AGAINST = ("triton_assign", "flash_kmeans", "torch_mm")


def retime_seconds(evaluator: ScheduleEvaluator, job: EvalJob, ahead: bool) -> tuple[float, float | None, str | None]:
    """(wall s, fitness, error) of one re-timing, in a process started ahead (`ahead`) or a one-shot worker."""
    # `reuse_bench_process` is what makes a run's re-timings take a process started ahead
    way = replace(evaluator, settings=replace(evaluator.settings, reuse_bench_process=ahead))
    started = time.perf_counter()
    retime = way.retime(job, "cuda")
    return time.perf_counter() - started, retime.fitness, retime.error


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="pairs of re-timings counted")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / SCHEDULE.name
        shutil.copy(SCHEDULE, path)
        job = EvalJob(1, "retime", path, None)
        evaluator = ScheduleEvaluator(op="kmeans_assign", workload="flash_kmeans", arch="sm_90a",
                                      settings=EvalSettings(device="cuda", backend="cuda", seed=0,
                                                            verdict_cache=str(Path(tmp) / "verdicts")),
                                      against=AGAINST)
        plan = [("warm-up", True)] + [(mode, mode == "started ahead") for _ in range(args.rounds)
                                      for mode in ("one-shot", "started ahead")]
        for mode, ahead in plan:
            seconds, fitness, error = retime_seconds(evaluator, job, ahead)
            rows.append({"mode": mode, "seconds": round(seconds, 2), "fitness": fitness, "error": error})
            print(f"{mode:14} {seconds:6.2f} s  fitness {fitness}  {error or ''}", flush=True)
        evaluator.close()
    summary = {mode: statistics.median(float(r["seconds"]) for r in rows if r["mode"] == mode)  # type: ignore[arg-type]
               for mode in ("one-shot", "started ahead")}
    print("median s: " + ", ".join(f"{mode} {s:.2f}" for mode, s in summary.items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"schedule": SCHEDULE.name, "rows": rows, "median_s": summary}, indent=1) + "\n")
    failed = [r for r in rows if r["error"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
