"""Compile assign_plain's kernel for sm_90a (no GPU) on aligned and misaligned inputs and count the global
loads and async copies of each width in the PTX: one JSON line per (dtype, layout).

Run as a script in a process *without* TRITON_INTERPRET; `test_triton_specialization.py` reads its output.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cake.lowering.triton.aot import compile_launches  # noqa: E402
from lowering_cases import REPO, lower_schedule  # noqa: E402

ASSIGN = REPO / "experiments" / "kmeans" / "assign_plain.cake"
# cp.async.{ca,cg}.shared.global [dst], [src], BYTES: the copy width
CP_ASYNC = re.compile(r"cp\.async\.\w+\.shared\.global(?:\.L2::\w+)? \[[^\]]+\], \[[^\]]+\], (0x\w+|\d+)")
LOAD = re.compile(r"ld\.global[\w.:]*")


def inputs(dtype: torch.dtype, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    b, n, k, d = 2, 256, 128, 64
    if layout == "contiguous":
        return torch.randn(b, n, d, dtype=dtype), torch.randn(b, k, d, dtype=dtype)
    # a window into wider rows: a row pitch of d + 3 and a base one element in, so nothing is 16-aligned
    return (torch.randn(b, n, d + 3, dtype=dtype)[..., 1 : d + 1],
            torch.randn(b, k, d + 3, dtype=dtype)[..., 1 : d + 1])


def main() -> None:
    lowered = lower_schedule(ASSIGN)
    assert lowered.kernel is not None, lowered.refusal
    for dtype in (torch.float32, torch.float16):
        for layout in ("contiguous", "sliced"):
            ((_, kernel),) = compile_launches(lowered.kernel, inputs(dtype, layout), "sm_90a")
            ptx = kernel.asm["ptx"]
            copies = Counter(int(size, 0) for size in CP_ASYNC.findall(ptx))
            print(json.dumps({"dtype": str(dtype).removeprefix("torch."), "layout": layout,
                              "cp_async_bytes": {str(k): v for k, v in copies.items()},
                              "loads": dict(Counter(LOAD.findall(ptx)))}))


if __name__ == "__main__":
    main()
