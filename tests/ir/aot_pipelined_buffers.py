"""Compile assign_plain's kernel (Triton backend) for each GPU target the cost model has Triton constants for, at
two pipeline depths, without a GPU, and print the shared memory each compiled kernel allocates: one JSON line per
(arch, STAGES). `test_triton_pipelined_buffers.py` reads it against the cost model's count of pipelined buffers.

Run as a script in a process *without* TRITON_INTERPRET.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lowering"))

from cake.lowering.triton.aot import compile_for_target  # noqa: E402
from lowering_cases import lower_schedule  # noqa: E402

ASSIGN = REPO / "experiments" / "kmeans" / "assign_plain.cake"
PARAMS = {"BN": 128, "BK": 64, "WARPS": 4}
SHAPE = {"B": 2, "N": 256, "K": 128, "D": 64}  # aligned rows, so the loads become async copies
ARCHS = ("sm_80", "sm_90a", "sm_100a")
STAGES = (3, 4)


def main() -> None:
    x = torch.randn(SHAPE["B"], SHAPE["N"], SHAPE["D"], dtype=torch.bfloat16)
    c = torch.randn(SHAPE["B"], SHAPE["K"], SHAPE["D"], dtype=torch.bfloat16)
    for stages in STAGES:
        lowered = lower_schedule(ASSIGN, {**PARAMS, "STAGES": stages})
        assert lowered.kernel is not None, lowered.refusal
        for arch in ARCHS:
            (usage,) = compile_for_target(lowered.kernel, (x, c), arch)
            print(json.dumps({"arch": arch, "stages": stages, "shared": usage.smem_bytes, **PARAMS, **SHAPE}),
                  flush=True)


if __name__ == "__main__":
    main()
