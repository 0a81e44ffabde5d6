"""How many evaluations a clean-start search needs in the cost model's own world: the offline agent and the loop as
`cake evolve` runs them on a GPU (24 proposals a turn, the 4 best evaluated), every candidate checked for sm_90a and
the CUDA backend at the fitness shape, and its fitness the model's predicted speedup (the calibration the GPU run
ranks with: the current codegen's fit of the bench's clock). No kernel runs and nothing is timed.

    python3 scripts/model_world_search.py [--seeds 0 1 2] [--turns 8] [--family-samples 16] [--json OUT]

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
from pathlib import Path
from typing import Any

from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.model_world import ModelWorld
from cake.agents.offline import FAMILY_SAMPLES, OfflineAgent, OfflineSettings
from cake.experiments.workload import get_workload
from cake.ir.cost_calibrations import BENCH_CLOCK
from cake.ir.parser import parse

from cake.runs.store import CandidateRow, RunStore

ROOT = Path(__file__).resolve().parents[1]
KMEANS = ROOT / "experiments" / "kmeans"
SEED = KMEANS / "assign_plain.cake"
MARKS = ("assign_pingpong.cake", "assign_pingpong_rs.cake", "assign_pingpong_rs_defer.cake")
ARCH, BACKEND = "sm_90a", "cuda"


def lineage(best: CandidateRow, rows: dict[int, CandidateRow]) -> list[str]:
    """The operators from the seed to `best`, first move first."""
    moves, row = [], best
    while row.parents:
        moves.append(row.mutation.split(";", 1)[0].split(":", 1)[0])
        row = rows[row.parents[0]]
    return moves[::-1]


def model_world() -> ModelWorld:
    """The kmeans assign's world as a GPU run of the CUDA backend ranks it: checked for sm_90a and the CUDA backend at
    the fitness shape, priced there with the fit of the bench's clock."""
    dims = get_workload("flash_kmeans").fitness_shape("kmeans_assign").dim_map
    world = ModelWorld(SEED, dims=dims, arch=ARCH, backend=BACKEND, validate_dims=dims, clock=BENCH_CLOCK)
    if world.baseline_ms is None:
        raise SystemExit("model_world_search: the cost model cannot price the seed schedule")
    return world


def search(seed: int, turns: int, world: ModelWorld, marks: dict[str, float],
           agent: OfflineSettings | None = None) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(Path(tmp) / "run", {})
        settings = LoopSettings(turns=turns + 1, proposals_per_turn=24, evals_per_turn=4, seed=seed)
        EvolutionLoop(store, OfflineAgent(agent), world, settings, [SEED]).run()
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
    parser.add_argument("--family-samples", type=int, default=FAMILY_SAMPLES,
                        help="draws of a family operator the agent chooses among by the model (1: one draw)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    agent = OfflineSettings(family_samples=args.family_samples)
    world = model_world()
    marks = {}
    for name in MARKS:
        ms = world.predict_ms(parse((KMEANS / name).read_text(), name))
        if ms is None:
            raise SystemExit(f"model_world_search: the cost model cannot price {name}")
        marks[name] = ms
    print("hand-written, predicted: " + ", ".join(f"{k} {v:.3f} ms" for k, v in marks.items()))
    results = []
    for seed in args.seeds:
        result = search(seed, args.turns, world, marks, agent)
        results.append(result)
        at = ", ".join(f"{k.removesuffix('.cake')} #{v}" if v else f"{k.removesuffix('.cake')} never"
                       for k, v in result["first_evaluation_at_least_as_fast_as"].items())
        print(f"seed {seed}: {result['evaluated']} evaluated, best {result['best_predicted_ms']:.3f} ms (turn "
              f"{result['best_turn']}); first at least as fast as {at}\n   {' -> '.join(result['lineage'])}\n   "
              f"{result['params']}", flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"marks_ms": marks, "agent": agent.to_json(), "turns": args.turns,
                                         "seeds": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
