"""The `fuse` operator's move on the family the search reaches, as two schedule files to verify and time.

    python3 scripts/fuse_operator_pair.py --out DIR [--compile]

From the plain seed (`experiments/kmeans/assign_plain.cake`), `warp_specialize` gives the two-launch ping-pong
the offline search reaches (norms hoisted into a launch of their own, a TMA producer and ping-pong consumers on a
persistent grid), at the pass's param defaults; `fuse_launches` fuses its first launch into the second. Writes
`DIR/two_launch.cake` and `DIR/fused.cake` and prints, for each, the cost model's prediction at the workload's
fitness shape for the CUDA backend (what a CPU search ranks them by). `--compile` also lowers both for the CUDA
backend (bf16, D static at the fitness shape) and compiles them with nvcc: ptxas's registers, spills and
warnings per kernel (the CPU check of what the GPU script then runs).

Exit status 0, or 1 when a file is refused by the checker for the CUDA backend or does not compile.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cake.experiments.workload import get_workload
from cake.ir import nodes as n
from cake.ir.check import check
from cake.ir.cost import predict
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.fuse_launches import fuse_launches
from cake.ir.transforms.warp_specialize import warp_specialize

from cake.diagnostics import render_all

SEED = Path(__file__).resolve().parents[1] / "experiments" / "kmeans" / "assign_plain.cake"
BACKEND = "cuda"


def pair() -> dict[str, n.Kernel]:
    plain = parse(SEED.read_text(), SEED.name)
    two = warp_specialize(plain)
    if two is None:
        raise SystemExit(f"warp_specialize does not apply to {SEED.name}: nothing to fuse")
    fused = fuse_launches(two)
    if fused is None:
        raise SystemExit("fuse_launches refuses the two-launch ping-pong (E0412): see `cake check --backend cuda`")
    return {"two_launch": two, "fused": fused}


def compile_report(kernel: n.Kernel, dims: dict[str, int], name: str) -> str:
    from cake.lowering.cuda.compile import compile_cubin
    from cake.lowering.cuda.program import generate

    program = generate(kernel, kernel.target, dtypes={"T": n.DType.BF16}, static_dims={"D": dims["D"]}, file=name)
    module = compile_cubin(program.source, program.arch, file=name,
                           smem_dynamic_bytes={c.kname: c.smem_bytes for c in program.launches},
                           tmem_columns={c.kname: c.tmem_columns for c in program.launches})
    return module.report.table() + ("" if module.report.warnings else "\nptxas: no warnings")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compile", action="store_true", help="lower for the CUDA backend and compile with nvcc")
    args = parser.parse_args()
    shape = get_workload("flash_kmeans").fitness_shape("kmeans_assign")
    dims = dict(shape.dim_map)
    args.out.mkdir(parents=True, exist_ok=True)
    status = 0
    for name, kernel in pair().items():
        text = print_kernel(kernel)
        path = args.out / f"{name}.cake"
        path.write_text(text)
        errors = [d for d in check(parse(text, path.name), backend=BACKEND, dims=dims, file=path.name) if d.is_error]
        if errors:
            print(render_all(errors, text), file=sys.stderr)
            status = 1
            continue
        prediction = predict(kernel, dims=dims, dtype=n.DType.BF16, arch_name=kernel.target, backend=BACKEND)
        print(f"{path}: {len(kernel.launches)} launches, fusions {[f'{f.launch}->{f.into}' for f in kernel.fusions]}; "
              f"cost model at {shape.name} ({BACKEND}): {prediction.time_ms:.4f} ms")
        if args.compile:
            print(compile_report(kernel, dims, path.name))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
