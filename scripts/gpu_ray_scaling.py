"""Evaluations per minute through the Ray executor with 1, 2 and 4 GPUs (or N CPU slots), and the scaling
efficiency: rate(n) / (n x rate(1)).

    python3 scripts/gpu_ray_scaling.py --gpus 1 2 4 --candidates 32 --json results/ray_scaling.json
    python3 scripts/gpu_ray_scaling.py --device cpu --slots 1 2 --candidates 2     # the CPU path

The same N distinct candidates (the workload's seed schedules, then clean offline-agent proposals from them)
are evaluated at every slot count by the real evaluator (`ScheduleEvaluator`: the contract gates in an
isolated worker, then on a GPU the timing against the baselines), each trial with an empty verdict cache of
its own, through a `RayExecutor` on a Ray started here with that many GPUs (CPUs). Wall time runs from the
first submission to the last result; Ray's start is not counted.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cake.agents.base import Parent, TurnContext
from cake.agents.cake_toolchain import CakeToolchain, EvalSettings
from cake.agents.offline import OfflineAgent

from cake.evaluation.protocol import EvalJob
from cake.evaluation.ray_executor import RayExecutor, ray_session
from cake.runs.store import ir_hash


@dataclass(frozen=True, slots=True)
class Trial:
    slots: int
    evaluations: int
    seconds: float
    statuses: dict[str, int]

    @property
    def per_minute(self) -> float:
        return 60.0 * self.evaluations / self.seconds if self.seconds > 0 else float("nan")


def toolchain_for(op: str, device: str, backend: str) -> CakeToolchain:
    from cake.experiments.workload import get_workload
    from cake.ir.parser import parse

    workload = get_workload(op)
    kernel = op if op != workload.name else workload.primary.contract
    seeds = tuple(workload.op(kernel).seed_paths())
    arch = parse(seeds[0].read_text(), seeds[0].name).target
    return CakeToolchain(workload=workload.name, op=kernel, arch=arch, seeds=seeds,
                         settings=EvalSettings(device=device, backend=backend, seed=0))


def candidates(toolchain: CakeToolchain, count: int, out: Path, *, seed: int = 0) -> list[EvalJob]:
    """`count` distinct, checker-clean schedules as jobs: the seeds first, then offline proposals from them."""
    texts: dict[str, str] = {}
    parents = []
    for i, path in enumerate(sorted(toolchain.workload.op(toolchain.op).seed_paths())):
        checked = toolchain.validate(path.read_text())
        if checked.kernel is not None and not checked.errors:
            texts.setdefault(ir_hash(checked.text), checked.text)
            parents.append(Parent(i, checked.text, checked.kernel, None, None, None, "passed"))
    rng = random.Random(f"ray-scaling:{seed}")
    for turn in range(1, 50):
        if len(texts) >= count:
            break
        ctx = TurnContext(turn=turn, op=toolchain.op, arch=toolchain.arch, n=count, parents=tuple(parents),
                          failures=(), seen_hashes=frozenset(texts), rng=rng, validate=toolchain.validate,
                          backend=toolchain.backend)
        for proposal in OfflineAgent().propose(ctx).proposals:
            checked = toolchain.validate(proposal.text)
            if checked.kernel is not None and not checked.errors:
                texts.setdefault(ir_hash(checked.text), checked.text)
    out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for i, (digest, text) in enumerate(list(texts.items())[:count]):
        path = out / f"{digest}.cake"
        path.write_text(text)
        kernel = toolchain.validate(text).kernel
        jobs.append(EvalJob(i, digest, path, toolchain.predict_ms(kernel) if kernel else None))
    return jobs


def trial(toolchain: CakeToolchain, jobs: list[EvalJob], slots: int, device: str, work: Path) -> Trial:
    """Evaluate every job on a Ray started here with `slots` GPUs (or CPUs), with a fresh verdict cache."""
    cache = work / f"verdicts-{slots}"
    evaluator = replace(toolchain.evaluator, settings=replace(toolchain.settings, verdict_cache=str(cache)))
    gpus = slots if device == "cuda" else 0
    with ray_session(num_cpus=slots if device == "cpu" else None, num_gpus=gpus):
        executor = RayExecutor(evaluator, device=device, slots=slots)
        statuses: dict[str, int] = {}
        started = time.monotonic()
        try:
            for job in jobs:
                executor.submit(job)
            while executor.pending():
                for done in executor.collect():
                    status = done.evaluation.status.value
                    statuses[status] = statuses.get(status, 0) + 1
        finally:
            executor.close()
        seconds = time.monotonic() - started
    return Trial(slots, len(jobs), seconds, statuses)


def efficiency(trials: list[Trial]) -> dict[int, float]:
    """rate(n) / (n x rate(smallest n) / smallest n): 1.0 is perfect scaling from the smallest trial."""
    base = min(trials, key=lambda t: t.slots)
    per_slot = base.per_minute / base.slots
    return {t.slots: t.per_minute / (t.slots * per_slot) for t in trials}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", default="flash_kmeans")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--backend", choices=("triton", "cuda"), default=None, help="default: cuda on a GPU")
    p.add_argument("--gpus", "--slots", dest="slots", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--candidates", type=int, default=32)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    backend = args.backend or ("cuda" if args.device == "cuda" else "triton")
    toolchain = toolchain_for(args.op, args.device, backend)
    with tempfile.TemporaryDirectory(prefix="cake-ray-scaling-") as tmp:
        work = Path(tmp)
        jobs = candidates(toolchain, args.candidates, work / "candidates")
        trials = [trial(toolchain, jobs, n, args.device, work) for n in sorted(args.slots)]
    eff = efficiency(trials)
    unit = "GPUs" if args.device == "cuda" else "CPU slots"
    print(f"{args.op}: {len(jobs)} candidates, backend {backend}, device {args.device}")
    print(f"{unit:>10} | evaluations | seconds | evals/min | efficiency | statuses")
    for t in trials:
        print(f"{t.slots:>10} | {t.evaluations:>11} | {t.seconds:7.1f} | {t.per_minute:9.2f} | {eff[t.slots]:10.2f} | "
              f"{t.statuses}")
    if args.json:
        payload: dict[str, Any] = {"op": args.op, "device": args.device, "backend": backend,
                                   "candidates": len(jobs),
                                   "trials": [{"slots": t.slots, "evaluations": t.evaluations, "seconds": t.seconds,
                                               "per_minute": t.per_minute, "efficiency": eff[t.slots],
                                               "statuses": t.statuses} for t in trials]}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
