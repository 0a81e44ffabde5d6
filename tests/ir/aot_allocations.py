"""Compile assign_plain (Triton backend) for sm_90a at the Triton cost sweep's cell, without a GPU, through
`compiled_allocations`, and print what Triton allocated beside the cost model's static estimate and its prediction
with the allocation: one JSON line per config; then what a GPU run's ranker (`Ranker.with_compiler`) prices the
first config at, beside `predict` given its allocation at the ranker's shape. `test_cost_allocations.py` reads it.

Run as a script in a process *without* TRITON_INTERPRET.
"""

from __future__ import annotations

import json
from pathlib import Path

from cake.agents.cake_toolchain import Ranker
from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors
from cake.ir.cost_calibrations import BENCH_CLOCK
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
    config = {"workload": "flash_kmeans", "op": "kmeans_assign", "arch": "sm_90a", "device": "NVIDIA H100 80GB HBM3",
              "eval": {"device": "cuda", "backend": "triton"}}
    ranker = Ranker.for_run(config)
    kernel = bind_params(PLAIN, CONFIGS[0])
    (ranked,) = ranker.predict_many([kernel])
    allocations = compiled_allocations(kernel, "sm_90a", ranker.shape.dim_map, DType.BF16)
    direct = predict(kernel, dims=ranker.shape.dim_map, dtype=DType.BF16, arch_name="sm_90a", device=ranker.device,
                     backend="triton", allocations=allocations, clock=BENCH_CLOCK).time_ms
    print(json.dumps({"ranker_ms": ranked, "direct_ms": direct, "with_compiler": ranker.with_compiler,
                      "static_ms": ranker.predict_ms(kernel)}), flush=True)


if __name__ == "__main__":
    main()
