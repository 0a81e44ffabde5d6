"""Compile assign_plain (Triton backend) for sm_90a at the Triton cost sweep's cell, without a GPU, through
`compiled_allocations`, and print what Triton allocated beside the cost model's static estimate and its prediction
with the allocation: one JSON line per config. `test_cost_allocations.py` reads it.

Run as a script in a process *without* TRITON_INTERPRET.
"""

from __future__ import annotations

import json
from pathlib import Path

from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.ir.transforms.bind_params import bind_params
from cake.lowering.triton.allocations import compiled_allocations

REPO = Path(__file__).resolve().parents[2]
PLAIN = parse((REPO / "experiments" / "kmeans" / "assign_plain.cake").read_text())
CELL = {"B": 8, "N": 16384, "K": 1024, "D": 128}  # the Triton cost sweep's cell
CONFIGS = ({"BN": 128, "BK": 128, "WARPS": 8, "STAGES": 3}, {"BN": 64, "BK": 64, "WARPS": 4, "STAGES": 2})


def main() -> None:
    for params in CONFIGS:
        (launch,) = PLAIN.launches
        allocation = compiled_allocations(bind_params(PLAIN, params), "sm_90a", CELL, DType.BF16)[launch.name]
        static, compiled = (predict(PLAIN, dims=CELL, params=params, dtype=DType.BF16, arch_name="sm_90a",
                                    backend="triton", factors=Factors(), allocations=given).launches[0].occupancy
                            for given in (None, {launch.name: allocation}))
        print(json.dumps({**params, "registers": allocation.registers_per_thread, "spilled": allocation.spilled_regs,
                          "smem": allocation.smem_bytes, "static_regs": static.regs_per_thread,
                          "static_ctas": static.ctas_per_sm, "regs": compiled.regs_per_thread,
                          "smem_per_cta": compiled.smem_bytes_per_cta, "ctas": compiled.ctas_per_sm,
                          "threads": compiled.threads_per_cta, "compiled": compiled.spills_compiled}), flush=True)


if __name__ == "__main__":
    main()
