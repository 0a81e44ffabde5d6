"""How many evaluations a clean-start search needs in the cost model's own world: the offline agent and the loop as
`cake evolve` runs them on a GPU (24 proposals a turn, the 4 best evaluated), every candidate checked for sm_90a and
the CUDA backend at the fitness shape, and its fitness the model's predicted speedup (the calibration the GPU run
ranks with: the current codegen's fit of the bench's clock). No kernel runs and nothing is timed.

    python3 scripts/model_world_search.py [--seeds 0 1 2] [--turns 8] [--json OUT]

Per seed: the evaluation at which the search first holds a schedule predicted at least as fast as the hand-written
`assign_pingpong_rs.cake` and as `assign_pingpong_rs_defer.cake`, its best predicted time, and that best's lineage
(the operators from the seed) and params. A search that does not reach the model's fast region here will not reach
it on a GPU either, however good the model; one that does needs about this many evaluations there, if the model
ranks the GPU's candidates as it ranks its own. A statement about the search, not about kernels.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cake.agents.base import Checked
from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.offline import OfflineAgent
from cake.agents.toolchain import EvalJob
from cake.agents.validation import make_validator
from cake.experiments.workload import get_workload
from cake.ir import nodes as n
from cake.ir.cost import CostError, predict
from cake.ir.cost_calibrations import BENCH_CLOCK
from cake.ir.parser import parse

from cake.runs.store import CandidateRow, CandidateStatus, Evaluation, FitnessKind, RunStore

ROOT = Path(__file__).resolve().parents[1]
KMEANS = ROOT / "experiments" / "kmeans"
SEED = KMEANS / "assign_plain.cake"
MARKS = ("assign_pingpong.cake", "assign_pingpong_rs.cake", "assign_pingpong_rs_defer.cake")
ARCH, BACKEND = "sm_90a", "cuda"


class ModelWorld:
    """A `Toolchain` whose evaluation is the cost model's prediction: legal candidates pass, fitness is the seed's
    predicted time over theirs."""

    op = "kmeans_assign"
    arch = ARCH
    backend = BACKEND
    fitness_kind = FitnessKind.MODEL

    def __init__(self) -> None:
        shape = get_workload("flash_kmeans").fitness_shape(self.op)
        self.dims = dict(shape.dim_map)
        self._validate = make_validator(ARCH, BACKEND, dims=self.dims)
        seed_ms = self.predict_ms(parse(SEED.read_text(), SEED.name))
        if seed_ms is None:
            raise SystemExit("model_world_search: the cost model cannot price the seed schedule")
        self.seed_ms = seed_ms

    def validate(self, text: str) -> Checked:
        return self._validate(text)

    def predict_ms(self, kernel: n.Kernel) -> float | None:
        try:
            return predict(kernel, dims=self.dims, dtype=n.DType.BF16, arch_name=ARCH, backend=BACKEND,
                           clock=BENCH_CLOCK).time_ms
        except CostError:
            return None

    def predict_many(self, kernels: Sequence[n.Kernel]) -> list[float | None]:
        return [self.predict_ms(k) for k in kernels]

    def devices(self) -> tuple[str, ...]:
        return ("cpu",)

    def describe(self) -> str:
        return "the cost model's world: legal candidates pass, fitness is the predicted speedup over the seed"

    def evaluate(self, job: EvalJob, device: str) -> Evaluation:
        fitness = self.seed_ms / job.predicted_ms if job.predicted_ms else None
        return Evaluation(CandidateStatus.PASSED, {"op": self.op, "passed": True, "gates": []}, (),
                          {"predicted_ms": job.predicted_ms or 0.0}, None, self.seed_ms, fitness, FitnessKind.MODEL,
                          None, device, 0.0)

    def confirm(self, job: EvalJob, device: str, evaluation: Evaluation) -> Evaluation:
        return evaluation


def lineage(best: CandidateRow, rows: dict[int, CandidateRow]) -> list[str]:
    """The operators from the seed to `best`, first move first."""
    moves, row = [], best
    while row.parents:
        moves.append(row.mutation.split(";", 1)[0].split(":", 1)[0])
        row = rows[row.parents[0]]
    return moves[::-1]


def search(seed: int, turns: int, world: ModelWorld, marks: dict[str, float]) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(Path(tmp) / "run", {})
        settings = LoopSettings(turns=turns + 1, proposals_per_turn=24, evals_per_turn=4, seed=seed)
        EvolutionLoop(store, OfflineAgent(), world, settings, [SEED]).run()
        rows = {r.id: r for r in store.candidates()}
    evaluated = sorted((r for r in rows.values() if r.evaluation is not None and r.predicted_ms is not None),
                       key=lambda r: r.id)
    reached = {name: next((i for i, r in enumerate(evaluated, 1) if (r.predicted_ms or 0.0) <= ms), None)
               for name, ms in marks.items()}
    best = min(evaluated, key=lambda r: r.predicted_ms or float("inf"))
    return {"seed": seed, "evaluated": len(evaluated), "best_predicted_ms": best.predicted_ms, "best_turn": best.turn,
            "first_evaluation_at_least_as_fast_as": reached, "lineage": lineage(best, rows),
            "params": {p.name: p.default for p in parse(best.ir_text).params},
            "cpu_seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--turns", type=int, default=8, help="turns after the seed turn")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    world = ModelWorld()
    marks = {}
    for name in MARKS:
        ms = world.predict_ms(parse((KMEANS / name).read_text(), name))
        if ms is None:
            raise SystemExit(f"model_world_search: the cost model cannot price {name}")
        marks[name] = ms
    print("hand-written, predicted: " + ", ".join(f"{k} {v:.3f} ms" for k, v in marks.items()))
    results = []
    for seed in args.seeds:
        result = search(seed, args.turns, world, marks)
        results.append(result)
        at = ", ".join(f"{k.removesuffix('.cake')} #{v}" if v else f"{k.removesuffix('.cake')} never"
                       for k, v in result["first_evaluation_at_least_as_fast_as"].items())
        print(f"seed {seed}: {result['evaluated']} evaluated, best {result['best_predicted_ms']:.3f} ms (turn "
              f"{result['best_turn']}); first at least as fast as {at}\n   {' -> '.join(result['lineage'])}\n   "
              f"{result['params']}", flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"marks_ms": marks, "seeds": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
