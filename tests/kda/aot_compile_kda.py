"""Compile a KDA schedule's launches for sm_90a without a GPU, as its first call on an H200 would: the dense kernel
(kda_forward's inputs then h0) at the benchmark's K = V = 128 in bf16 and at a (17, 5) tail in f16. Run as a
script in a process *without* TRITON_INTERPRET; prints one JSON line per (dtype, K, V).

    python tests/kda/aot_compile_kda.py FILE.cake ['{"BV": 32}']

The optional second argument binds the schedule's params (JSON, as `cake verify --params`): a register/spill
report per variant, for choosing tile sizes, warps and stages without a GPU.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import torch
from cake.lowering.runtime import load_schedule
from cake.lowering.triton.aot import compile_for_target

CASES = ((torch.bfloat16, 128, 128), (torch.float16, 17, 5))


def main(path: str, params: str | None = None) -> None:
    dense = load_schedule(path, params=params)
    batch, total, heads = 1, 100, 2
    for dtype, dk, dv in CASES:
        tokens = [torch.randn(batch, total, heads, d).to(dtype) for d in (dk, dk, dv, dk)]
        inputs = [*tokens, torch.randn(batch, total, heads).to(dtype), torch.zeros(heads), torch.zeros(heads, dk),
                  torch.zeros(batch, heads, dk, dv)]
        row: dict[str, object] = {"dtype": str(dtype), "K": dk, "V": dv}
        try:
            row["launches"] = [dataclasses.asdict(u) for u in compile_for_target(dense, inputs, "sm_90a")]
        except Exception as error:  # noqa: BLE001 - reported to the test, which fails on it
            row["error"] = f"{type(error).__name__}: {error}"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
