"""CPU: ptxas's register and spill report for every timed CUDA-backend candidate of some run stores.

    python3 scripts/ptxas_variants.py results/h200-2026-12-02/s5-call1/costdata/runs/cuda-* \
        --out results/cpu-2026-12-02/ptxas_cuda_variants.json

Each candidate's IR is lowered by the CUDA backend at its run's static dims and dtype and compiled with the
local nvcc for the run's target (the same flags and compile cache as `cake bench`), so the figures are what
the timed kernel used when this nvcc and this CUDA codegen version are the run's (the s5 runs: nvcc 13.0.88,
recorded in their config, and codegen 1; the report records the codegen version it lowered with). The
cost model estimates registers from the IR; this report is the ground truth its estimate is judged against
(`scripts/cost_residuals.py --registers`). Prints a table and writes JSON: ident -> launch -> resources.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.lowering.cuda.backend import compile_target, specialize_for_call
from cake.lowering.cuda.compile import CompileError, compile_cubin, nvcc_version
from cake.lowering.cuda.program import CODEGEN_VERSION, generate

from cake.runs.store import CandidateStatus, RunStore

HOPPER = (9, 0)  # the H200's compute capability: the runs' device


def timed_candidates(run_dir: Path) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(the run's config, [(ir hash, IR text)] of its timed, passed candidates)."""
    with RunStore.open_read_only(run_dir) as store:
        rows = [(r.ir_hash, r.ir_text) for r in store.candidates()
                if r.evaluation is not None and r.evaluation.measured_ms is not None
                and r.status is CandidateStatus.PASSED]
        return dict(store.config), rows


def resources(text: str, where: str, dims: dict[str, int], dtype: DType) -> dict[str, dict[str, int]]:
    """ptxas's report per launch of one schedule (its params already bound in the IR)."""
    kernel = parse(text, where)
    dtypes = {d.name: dtype for d in kernel.dtype_vars}
    statics = {d.name: dims[d.name] for d in kernel.dims if d.static}
    lowered = specialize_for_call(kernel, kernel.target, dtypes, statics, where)
    program = generate(lowered, kernel.target, dtypes=dtypes, static_dims=statics, file=where)
    compiled = compile_cubin(program.source, compile_target(kernel.target, HOPPER),
                             smem_dynamic_bytes={c.kname: c.smem_bytes for c in program.launches},
                             tmem_columns={c.kname: c.tmem_columns for c in program.launches}, file=where)
    return {k.name: {"registers": k.registers, "spill_bytes": k.spill_bytes, "stack_bytes": k.stack_frame_bytes}
            for k in compiled.report.kernels}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories of the CUDA backend")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=2, help="parallel nvcc processes")
    args = parser.parse_args(argv)
    work: list[tuple[str, str, dict[str, int], DType]] = []
    for run in args.runs:
        config, rows = timed_candidates(run)
        backend = str(config.get("eval", {}).get("backend") or config.get("backend") or "")
        if backend != "cuda":
            print(f"ptxas_variants: {run} is a {backend or 'unrecorded'}-backend run; skipped", file=sys.stderr)
            continue
        dims = {str(k): int(v) for k, v in config["dims"].items()}
        work += [(ident, text, dims, DType(str(config["dtype"]))) for ident, text in rows]

    def one(item: tuple[str, str, dict[str, int], DType]) -> tuple[str, dict[str, Any]]:
        ident, text, dims, dtype = item
        try:
            return ident, resources(text, ident, dims, dtype)
        except CompileError as error:
            return ident, {"error": str(error)[:300]}

    report: dict[str, Any] = {}
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for ident, res in pool.map(one, work):
            report[ident] = res
    print(f"{'ident':18} {'launch':40} {'regs':>5} {'spill B':>8}")
    for ident, launches in report.items():
        for name, r in launches.items():
            if isinstance(r, dict):
                print(f"{ident:18} {name[:40]:40} {r['registers']:>5} {r['spill_bytes']:>8}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"nvcc": nvcc_version(), "cuda_codegen": CODEGEN_VERSION, "capability": list(HOPPER),
                                    "runs": [str(r) for r in args.runs], "candidates": report}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
