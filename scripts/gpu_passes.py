"""Points of the warp-specialized family the passes build from the plain seed, verified and timed on the H200.

    python3 scripts/gpu_passes.py --out DIR [--max-seconds 2] [--dry-run]

`warp_specialize` (cake.ir.transforms) turns `assign_plain.cake` into a TMA producer feeding `CONSUMERS`
ping-ponging wgmma consumers, with its numbers as params (PRODUCER_REGS, CONSUMER_REGS, CONSUMERS,
HOIST_WARPS, and the seed's BK, BN, STAGES). This script binds a few points of that space, among them the
hand-written kernel's numbers (for comparison with `assign_pingpong.cake`, also timed) and points past it
(3 and 4 consumers, other register splits), checks each at the CAKE cell for sm_90a and the CUDA backend,
then runs each clean one through the evaluator's bench worker (the bf16 gates, then timing interleaved with
flash-kmeans). Prints a table; writes `passes.json` (one row per point) and the specialized `.cake` files.

--dry-run: build, check and write the points, compile each with nvcc when it is on PATH (no GPU needed), and
skip the bench: the CPU test of this script.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from cake.experiments.kmeans.workload import FOLDER
from cake.experiments.workload import get_workload
from cake.ir import nodes as n
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms import apply
from cake.ir.transforms.bind_params import bind_params
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.refit_forms import refit_forms
from cake.ir.transforms.warp_specialize import warp_specialize

ARCH, BACKEND = "sm_90a", "cuda"
# Points of the family: the hand-written kernel's numbers first, then moves past it. CONSUMER_REGS is fitted
# to what the register file leaves unless a point names it.
POINTS: tuple[dict[str, int], ...] = (
    {"BK": 128, "STAGES": 4, "CONSUMERS": 2, "PRODUCER_REGS": 40},
    {"BK": 128, "STAGES": 4, "CONSUMERS": 2, "PRODUCER_REGS": 24},
    {"BK": 128, "STAGES": 2, "CONSUMERS": 3, "PRODUCER_REGS": 24},
    {"BK": 64, "STAGES": 4, "CONSUMERS": 3, "PRODUCER_REGS": 24},
    {"BK": 64, "STAGES": 4, "CONSUMERS": 4, "PRODUCER_REGS": 24},
    {"BK": 128, "STAGES": 3, "CONSUMERS": 2, "PRODUCER_REGS": 24, "HOIST_WARPS": 8},
    {"BK": 64, "STAGES": 5, "CONSUMERS": 2, "PRODUCER_REGS": 24},
)


def family() -> n.Kernel:
    seed = FOLDER / "assign_plain.cake"
    out = warp_specialize(parse(seed.read_text(), seed.name))
    if out is None:
        raise SystemExit("warp_specialize does not apply to assign_plain.cake")
    return out


def point(kernel: n.Kernel, values: dict[str, int]) -> n.Kernel:
    bound = apply(refit_forms, bind_params(kernel, values))
    return bound if "CONSUMER_REGS" in values else apply(fit_consumer_regs, bound)


def compiles(kernel: n.Kernel, dims: dict[str, int]) -> str:
    """'ok' / 'spills N B' / the nvcc failure, for the dry run."""
    from cake.lowering.cuda.compile import compile_cubin
    from cake.lowering.cuda.program import generate

    program = generate(kernel, ARCH, dtypes={"T": n.DType.BF16}, static_dims={"D": dims["D"]}, file="point.cake")
    module = compile_cubin(program.source, program.arch, file="point.cake",
                           smem_dynamic_bytes={c.kname: c.smem_bytes for c in program.launches},
                           tmem_columns={c.kname: c.tmem_columns for c in program.launches})
    spills = sum(k.spill_bytes for k in module.report.kernels)
    return f"spills {spills} B" if spills else "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=2.0, help="timing guard per point")
    parser.add_argument("--dry-run", action="store_true", help="build, check and compile only; no GPU")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dims = get_workload("flash_kmeans").fitness_shape("kmeans_assign").dim_map
    base = family()
    rows: list[dict[str, object]] = []
    todo: list[tuple[str, dict[str, int], Path | None, str]] = [
        ("assign_pingpong.cake (hand-written)", {}, FOLDER / "assign_pingpong.cake", "")]
    for values in POINTS:
        kernel = point(base, values)
        errors = sorted({d.code for d in check(kernel, arch=ARCH, backend=BACKEND, dims=dims) if d.is_error})
        params = {p.name: p.default for p in kernel.params}
        if errors:
            todo.append(("warp_specialize(assign_plain)", params, None, "refused " + ",".join(errors)))
            continue
        tag = "_".join(f"{k}{v}" for k, v in sorted(values.items()))
        path = args.out / f"ws_{tag}.cake"
        path.write_text(print_kernel(kernel))
        todo.append(("warp_specialize(assign_plain)", params, path, ""))
    for name, params, path, refused in todo:
        row: dict[str, object] = {"schedule": name, "params": params, "file": str(path) if path else None}
        if refused or path is None:
            row["status"] = refused
        elif args.dry_run:
            kernel = parse(path.read_text(), path.name)
            row["status"] = compiles(kernel, dims) if shutil.which("nvcc") else "checked (no nvcc)"
        else:
            # the evaluator's bench worker, as the variants script uses it
            from gpu_assign_variants import bench_variant

            started = time.perf_counter()
            row.update(bench_variant(path, args.max_seconds))
            row["seconds"] = round(time.perf_counter() - started, 1)
        rows.append(row)
        speed = f"{row['speedup']:.3f}x" if row.get("speedup") else "-"
        short = {k: v for k, v in params.items() if k in ("BK", "STAGES", "CONSUMERS", "PRODUCER_REGS",
                                                             "CONSUMER_REGS", "HOIST_WARPS")}
        print(f"{name:36} {json.dumps(short):96} {row.get('ms') or '-':>10} ms  {speed:>8}  {row['status']}",
              flush=True)
        (args.out / "passes.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
