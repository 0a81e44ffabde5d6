"""Compile every schedule the Triton backend accepts for its GPU target, without a GPU.

Run as a script in a process *without* TRITON_INTERPRET (Triton's compiler cannot run in interpreter mode);
`test_triton_compile.py` does that and reads the JSON lines this prints: one per (schedule, dtype, shape).
Each compile goes through Triton's real pipeline down to a cubin; errors are mapped back to the schedule by
the backend's `diagnose`, exactly as a compile error at a kernel's first call on a GPU would be.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cake.lowering.triton.aot import compile_for_target  # noqa: E402
from cake.verifier.registry import get_contract  # noqa: E402
from lowering_cases import (  # noqa: E402
    fixture_schedules,
    lower_schedule,
    make_inputs,
    reference_shapes,
    schedule_dtypes,
    schedule_id,
    shipped_schedules,
)

from cake.diagnostics import render  # noqa: E402

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def main(paths: list[Path]) -> None:
    from triton.compiler.errors import CompilationError

    for path in paths:
        lowered = lower_schedule(path)
        if lowered.kernel is None:
            continue
        contract = get_contract(lowered.op)
        allowed = schedule_dtypes(path)
        for dtype in DTYPES:
            if dtype not in allowed:
                continue
            for shape_index, dims in enumerate(reference_shapes(contract)[1:]):  # every dim 1, and odd dims
                row = {"schedule": schedule_id(path), "dtype": str(dtype), "dims": dims}
                inputs = make_inputs(contract, dims, dtype, seed=shape_index)
                try:
                    usage = compile_for_target(lowered.kernel, inputs, lowered.kernel.lowered.arch)
                except CompilationError as error:
                    text = Path(path).read_text(encoding="utf-8")
                    row["error"] = render(lowered.kernel.backend.diagnose(lowered.kernel.lowered, error), text)
                else:
                    row["launches"] = [{"launch": u.launch, "registers": u.registers_per_thread,
                                        "spill_bytes": u.spill_bytes, "smem_bytes": u.smem_bytes} for u in usage]
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]] or shipped_schedules() + fixture_schedules())
