"""Time fla's `chunk_kda` (fused flags) and a CAKE KDA schedule at FlashKDA's six shapes, interleaved in
one process with the verifier's timing protocol (cold L2, rotated input sets, device events, medians, fp64
spot checks before and after timing), and write JSON:

    python3 scripts/gpu_kda_bench.py --json OUT.json --seed-verdict VERIFY.json [--schedule FILE.cake]
        [--params '{"C": 32}'] [--shapes h64_fixed ...]

The schedule defaults to the chunk-parallel seed (kda_fused_chunkpar.cake); `--params` binds its params (JSON,
as `cake verify` and the lowering take them), defaults otherwise. `--dry-run` does everything but time (no GPU:
the schedule is lowered with its params, the verdict read, the contestants and shapes listed, the JSON written),
so a typo fails on a CPU, not in the GPU session.

The seed is timed only when `--seed-verdict` (the JSON of `cake verify --schedule ... --device cuda`) says
it passed the contract gates; otherwise it is reported as not timed, with the reason. Inputs follow the
benchmark: bf16 q, k, v, raw gate g and beta logits, A_log = log U(1, 16) and dt_bias ~ N(0, 1) in fp32, no
initial state; the varlen shapes pass `cu_seqlens` of their sequence lengths (shapes.SEQUENCE_LENGTHS).
`run_shapes` takes the clock and the contestants as parameters, so its logic runs on a CPU in the tests.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from cake.experiments.kda import shapes as kda_shapes
from cake.experiments.workload import Shape
from cake.verifier.contracts import get_contract
from cake.verifier.timing import Clock, Contestant, TimingConfig, Verification, measure, spot_check

OP = "kda_forward"
SEED_SCHEDULE = Path(__file__).resolve().parents[1] / "experiments" / "kda" / "kda_fused_chunkpar.cake"
CONFIG = TimingConfig(warmup_calls=3, min_reps=10, max_reps=40, max_wall_s=3.0)
# One input set per shape (805 MB at H=96, far past the L2; every call starts cold anyway): the fp64 spot
# check, a token-by-token loop on the host, runs before and after timing for each set and contestant.
POOL = 1
SPOT_HEADS = 2


def shape_inputs(shape: Shape, device: str, seed: int) -> tuple[Any, ...]:
    """One input set in kda_forward's signature, drawn on the CPU from `seed` and placed on `device`."""
    d = shape.dim_map
    gen = torch.Generator().manual_seed(seed)
    dtype = shape.torch_dtype
    b, t, h, k, v = d["B"], d["T"], d["H"], d["K"], d["V"]

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=gen)

    lengths = kda_shapes.SEQUENCE_LENGTHS.get(shape.name)
    cu = None if lengths is None else torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    a_log = torch.empty(h).uniform_(1.0, 16.0, generator=gen).log()
    dt_bias = randn(h, k).clamp(-4.0, 4.0)
    tensors = [randn(b, t, h, k), randn(b, t, h, k), randn(b, t, h, v), randn(b, t, h, k), randn(b, t, h)]
    out: list[Any] = [x.to(dtype).to(device) for x in tensors]
    out += [a_log.to(device), dt_bias.to(device), None, None if cu is None else cu.to(device)]
    return tuple(out)


def run_shapes(shapes: Sequence[Shape], contestants: Sequence[Contestant], clock: Clock, device: str, *,
               pool: int = POOL, config: TimingConfig = CONFIG, seed: int = 0) -> list[dict[str, Any]]:
    """Per shape: each contestant's median (or why it has none) and candidates' speedups over the fastest
    baseline."""
    contract = get_contract(OP)
    reports = []
    for shape in shapes:
        sets = [shape_inputs(shape, device, seed + i) for i in range(pool)]
        check = spot_check(contract, shape.torch_dtype, {"H": SPOT_HEADS}, seed)
        samples = measure(contestants, sets, clock, check, config)
        baselines = [s.median_ms for s in samples if not s.candidate and s.ok]
        best = min(baselines) if baselines else None
        rows = []
        for s in samples:
            median = s.median_ms if s.ok else None
            rows.append({"name": s.name, "candidate": s.candidate, "median_ms": median,
                         "p10_ms": s.quantile_ms(0.1) if s.ok else None, "p90_ms": s.quantile_ms(0.9) if s.ok else None,
                         "reps": len(s.times_ms), "failure": s.failure,
                         "speedup": best / median if s.candidate and best and median else None})
        reports.append({"shape": shape.to_json(), "sequence_lengths": kda_shapes.SEQUENCE_LENGTHS.get(shape.name),
                        "measurements": rows})
        for row in rows:
            print(f"{shape.name:22} {row['name']:24} "
                  + (f"{row['median_ms']:.3f} ms" if row["median_ms"] is not None else f"not timed: {row['failure']}")
                  + (f"  speedup {row['speedup']:.3f}x" if row["speedup"] else ""), flush=True)
    return reports


def geomean_speedup(reports: Sequence[dict[str, Any]], name: str) -> float | None:
    ratios = [m["speedup"] for r in reports for m in r["measurements"] if m["name"] == name]
    if not ratios or any(r is None for r in ratios):
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def seed_verification(path: Path | None) -> Verification:
    """The schedule's verdict: `cake verify --json` of one seed (a Verdict) or of `--seeds` (every seed's)."""
    if path is None or not path.is_file():
        return Verification(False, "none", f"no verdict at {path}")
    from cake.verifier.multiseed import SeededVerdicts
    from cake.verifier.results import Verdict

    text = path.read_text()
    if "verdicts" in json.loads(text):
        seeded = SeededVerdicts.from_json(text)
        return Verification(seeded.passed, "battery", seeded.summary())
    verdict = Verdict.from_json(text)
    failed = ", ".join(g.gate_id for g in verdict.failures)
    return Verification(verdict.passed, "battery", "all gates passed" if verdict.passed else f"failed {failed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu_kda_bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--seed-verdict", type=Path, help="`cake verify --json` of the seed schedule on this GPU")
    parser.add_argument("--schedule", type=Path, default=SEED_SCHEDULE)
    parser.add_argument("--params", help="JSON object binding the schedule's params (default: their defaults)")
    parser.add_argument("--shapes", nargs="+", default=[s.name for s in kda_shapes.GPU_SHAPES],
                        choices=[s.name for s in kda_shapes.GPU_SHAPES])
    parser.add_argument("--dry-run", action="store_true", help="lower and list, time nothing (runs on a CPU)")
    args = parser.parse_args(argv)

    from cake.experiments.kda.adapt import load_schedule
    from cake.experiments.kda.baselines import FLA_CHUNK
    from cake.experiments.workload import BaselineUnavailable
    from cake.verifier.timing import CudaClock

    by_name = {s.name: s for s in kda_shapes.GPU_SHAPES}
    shapes = [by_name[name] for name in args.shapes]
    contestants: list[Contestant] = []
    notes: dict[str, str] = {}
    try:
        fla = FLA_CHUNK.load()
        contestants.append(Contestant(FLA_CHUNK.name, fla.run, fla.prepared, candidate=False))
    except BaselineUnavailable as missing:
        notes[FLA_CHUNK.name] = str(missing)
    verification = seed_verification(args.seed_verdict)
    # Lowered before the verdict is consulted, so bad params or a refused schedule fail here, in a dry run too.
    kernel = load_schedule(args.schedule, params=args.params)
    if verification.passed:
        contestants.append(Contestant(args.schedule.stem, kernel, verification=verification))
    else:
        notes[args.schedule.stem] = f"not timed: {verification.detail}"
    for name, why in notes.items():
        print(f"{name}: {why}", flush=True)
    if args.dry_run:
        print(f"dry run: would time {[c.name for c in contestants]} at {[s.name for s in shapes]}", flush=True)
        reports: list[dict[str, Any]] = []
        device = "none (dry run)"
    else:
        reports = run_shapes(shapes, contestants, CudaClock(), "cuda") if contestants else []
        device = torch.cuda.get_device_name()
    versions = {"torch": torch.__version__, "device": device}
    for module in ("triton", "fla"):
        try:
            versions[module] = str(__import__(module).__version__)
        except ImportError:
            versions[module] = "not installed"
    data = {"op": OP, "protocol": "verifier.timing.measure: interleaved, cold L2, CUDA events, medians; "
                                  f"fp64 spot check on {SPOT_HEADS} heads before and after timing",
            "config": {"input_sets": POOL, "warmup_calls": CONFIG.warmup_calls, "min_reps": CONFIG.min_reps, "max_reps": CONFIG.max_reps,
                       "max_wall_s": CONFIG.max_wall_s},
            "versions": versions, "schedule": str(args.schedule), "params": args.params, "dry_run": args.dry_run,
            "contestants": [c.name for c in contestants], "notes": notes, "seed_verification": verification.detail, "shapes": reports,
            "geomean_speedup": {c.name: geomean_speedup(reports, c.name) for c in contestants if c.candidate}}
    args.json.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.json}; geomean speedup over fla_chunk_kda: {data['geomean_speedup']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
