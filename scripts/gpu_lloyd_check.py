"""A whole run of Lloyd iterations on the GPU checked against an fp64 Lloyd from the same initial centroids.

    python3 scripts/gpu_lloyd_check.py --out "$RES/lloyd_check"         # default steps, moderate shapes, 20 its
    python3 scripts/gpu_lloyd_check.py --out DIR --dry-run --step kmeans_assign=experiments/kmeans/controls.py:kmeans_assign \\
        --step kmeans_update=experiments/kmeans/controls.py:kmeans_update                    # CPU rehearsal

At each shape (default B=4 N=16384 K=1024 D=128 in bf16 and in fp16: four batches of the cell's K and D at a
quarter of its points), from initial centroids drawn from the points (seeded, as a k-means user starts),
`experiments/kmeans/lloyd_check.py` runs `--iterations` iterations of each run and judges every one: same
assignments up to ties (gap within the assign contract's tolerance plus the exact centroid-drift bound; the
reference re-syncs to the run's tie-breaks), centroids within the update contract's tolerance, the first
non-tie difference reported and the comparison stopped there. The fp64 reference runs on the GPU.

Runs judged: **ours** (the pipeline's steps: default `assign_pingpong.cake@cuda` + `update_ranked.cake@triton`,
the op's default update; an absent default stops the script with what to pass), **torch** (torch_mm assign +
index_add update: a control — if it fails, the check is wrong, not the kernels) and **flash_kmeans** (one `batch_kmeans_Euclid`
iteration per step; reported, not required). No timing here; the gates run in the bench stages. Writes
OUT/gpu_lloyd_check.json. Exit 0 when ours and the control pass at every shape. Expected runtime on the
H200: ~1 min (mostly compiling the schedules).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cake.experiments.kmeans.workload import LLOYD, WORKLOAD
from gpu_repeat import now

DEFAULT_SHAPES = ("B=4,N=16384,K=1024,D=128:bf16", "B=4,N=16384,K=1024,D=128:fp16")
REQUIRED = ("ours", "torch")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--step", action="append", default=[], metavar="OP=SOURCE",
                        help="a step's kernel, FILE.cake[@BACKEND] or PATH.py:FUNC (default: the pipeline's)")
    parser.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), help="named or B=..,N=..,K=..,D=..:dtype")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dry-run", action="store_true", help="the CPU tiny shape in fp32, Triton interpreted")
    return parser.parse_args(argv)


def runs(kernels: dict[str, Callable[..., Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    from cake.experiments.kmeans import baselines as fkb
    from cake.experiments.kmeans.lloyd_check import lloyd_step
    from cake.experiments.workload import BaselineUnavailable

    ready: dict[str, Any] = {
        "ours": lloyd_step(kernels),
        "torch": lloyd_step({"kmeans_assign": fkb.torch_assign_mm, "kmeans_update": fkb.torch_update_index_add})}
    missing = {}
    try:
        ready["flash_kmeans"] = fkb.load_flash_kmeans_lloyd_step()
    except BaselineUnavailable as why:
        missing["flash_kmeans"] = str(why)
    return ready, missing


def initial_state(shape: Any, device: str, seed: int) -> tuple[Any, Any]:
    """x ~ randn in the shape's dtype; c0 = K distinct points of each batch (seeded)."""
    import torch

    dims = shape.dim_map
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(dims["B"], dims["N"], dims["D"], generator=gen).to(device=device, dtype=shape.torch_dtype)
    picks = torch.stack([torch.randperm(dims["N"], generator=gen)[: dims["K"]] for _ in range(dims["B"])])
    c0 = torch.gather(x, 1, picks.to(device)[:, :, None].expand(-1, -1, dims["D"])).contiguous()
    return x, c0


def main(argv: Sequence[str] | None = None) -> int:
    import os

    import torch
    from cake.experiments.kmeans.lloyd_check import check_lloyd
    from cake.experiments.workload import parse_shape

    from cake.evaluation.bench import BenchSetupError
    from cake.evaluation.pipeline_bench import load_steps, resolve_steps

    args = parse_args(argv)
    try:
        steps = resolve_steps(LLOYD, args.step, Path.cwd())
    except BenchSetupError as error:
        print(f"gpu_lloyd_check: {error}. Nothing was checked.", file=sys.stderr)
        return 2
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_lloyd_check: no CUDA device (run with --dry-run to rehearse on a CPU)", file=sys.stderr)
        return 2
    if args.dry_run and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        print("gpu_lloyd_check: --dry-run runs Triton kernels under the interpreter; set TRITON_INTERPRET=1",
              file=sys.stderr)
        return 2
    device = "cpu" if args.dry_run else "cuda"
    spec = WORKLOAD.op(LLOYD.inputs_from)
    shapes = [spec.cpu_shape] if args.dry_run else [parse_shape(t, spec.gpu_shapes, "bf16") for t in args.shapes]
    kernels = load_steps(steps)
    ready, missing = runs(kernels)
    started = time.perf_counter()
    rows = []
    for shape in shapes:
        x, c0 = initial_state(shape, device, args.seed)
        row: dict[str, Any] = {"shape": shape.to_json(), "runs": {}, "unavailable": missing}
        for name, step in ready.items():
            t0 = time.perf_counter()
            result = check_lloyd(step, x, c0, args.iterations)
            row["runs"][name] = {**result.to_json(), "seconds": time.perf_counter() - t0}
            print(f"{shape.name} {shape.describe()} {name}: {result.summary()}", flush=True)
        for name, why in missing.items():
            print(f"{shape.name} {name}: not available: {why}", flush=True)
        rows.append(row)
        del x, c0
        if device == "cuda":
            torch.cuda.empty_cache()
    passed = all(row["runs"][name]["ok"] for row in rows for name in REQUIRED)
    result_json = {"date": now(), "dry_run": args.dry_run, "device": device,
                   "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                   "steps": {op: ref.describe() for op, ref in steps}, "iterations": args.iterations,
                   "seed": args.seed, "required": list(REQUIRED), "passed": passed, "shapes": rows,
                   "elapsed_s": time.perf_counter() - started}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_lloyd_check.json").write_text(json.dumps(result_json, indent=2) + "\n")
    print(f"gpu_lloyd_check: {'PASSED' if passed else 'FAILED'} (required: {', '.join(REQUIRED)})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
