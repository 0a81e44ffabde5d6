"""What the timing protocol's fp64 spot checks cost the host per shape, with the reference computed once per input
set (`cake.verifier.timing.spot_check` now) against once per call (before: every contestant, before and after
timing, recomputed it).

    python3 scripts/spot_check_cost.py --op kda_forward --shapes h96_fixed h64_varlen_mixed [--device cuda]
        [--contestants 2] [--json OUT.json]

Per shape: the input sets the bench would rotate (`pool_size`, at least two) and zero outputs (a check computes
its fp64 reference before it compares anything, so a failing output costs what a passing one does, less the
comparisons it skips), then the protocol's 2 x contestants checks per set, timed on one `spot_check` (the reference
reused) and on a fresh one per call (recomputed each time, as before). Host seconds, one run: a cost figure for the
evaluation loop, not a kernel timing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from cake.experiments.workload import workload_for_op
from cake.verifier.contracts import shape_of
from cake.verifier.registry import get_contract
from cake.verifier.timing import Check, input_set_bytes, make_inputs, pool_size, spot_check

from cake.arch import DEVICES


def _seconds(calls: Sequence[tuple[tuple[Any, ...], tuple[torch.Tensor, ...]]],
             make_check: Callable[[], Check], *, fresh_each: bool) -> float:
    check = make_check()
    started = time.perf_counter()
    for inputs, outputs in calls:
        check = make_check() if fresh_each else check
        check(inputs, outputs)  # the verdict is not the point: zero outputs fail once the reference is computed
    return time.perf_counter() - started


def cost(op: str, shape_name: str, device: str, contestants: int) -> dict[str, Any]:
    spec = workload_for_op(op).op(op)
    contract = get_contract(spec.contract)
    shape = spec.shape(shape_name)
    dims, dtype = shape.dim_map, shape.torch_dtype
    n_sets = pool_size(input_set_bytes(contract, dims, dtype), DEVICES["H200"].l2_bytes)
    sets = [make_inputs(contract, dims, dtype, device, seed) for seed in range(n_sets)]
    out_dtypes = contract.output_dtypes(list(sets[0]), dtype)
    outputs = tuple(torch.zeros(shape_of(o, dims), dtype=d, device=device)
                    for o, d in zip(contract.outputs, out_dtypes, strict=True))
    calls = [(inputs, outputs) for _ in range(2 * contestants) for inputs in sets]

    def make_check() -> Check:
        return spot_check(contract, dtype, dict(spec.spot_sample), 0)

    make_check()(*calls[0])  # untimed: the first check pays one-time costs (the first host ops, lazy inits)
    reused = _seconds(calls, make_check, fresh_each=False)
    recomputed = _seconds(calls, make_check, fresh_each=True)
    return {"shape": shape_name, "sets": n_sets, "checks": len(calls), "reused_s": round(reused, 3),
            "recomputed_s": round(recomputed, 3), "saved_s": round(recomputed - reused, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", required=True)
    parser.add_argument("--shapes", nargs="+", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--contestants", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [cost(args.op, name, args.device, args.contestants) for name in args.shapes]
    for row in rows:
        print(f"{row['shape']}: {row['checks']} checks on {row['sets']} sets, reference reused {row['reused_s']} s, "
              f"recomputed each call {row['recomputed_s']} s, saved {row['saved_s']} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
