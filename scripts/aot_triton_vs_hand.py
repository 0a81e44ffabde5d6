"""The hot loop's instructions, lowered vs hand-written Triton assign, compiled for sm_90a on a CPU (no GPU needed).

    python3 scripts/aot_triton_vs_hand.py --out aot_vs_hand.json [--config 128,128,4,2] [--dtype bfloat16]
        [--dump DIR]   # also write each kernel's SASS, PTX and TTGIR there

A proxy for the H200 timing of `scripts/gpu_triton_vs_hand.py` that runs anywhere Triton and its bundled
cuobjdump are: each kernel is compiled ahead of time (`cake.lowering.triton.aot`, specialized as the JIT would
specialize a call at the cake cell's strides) and disassembled; the main loop is the largest backward branch
whose body holds the tensor-core instruction (HGMMA), and its SASS is counted by opcode. Per-element CUDA-core
work in the distance epilogue (the part that bounds this kernel) shows up as FFMA / FMNMX / FSETP / FSEL / SEL
counts; a per-tile ||c||^2 as FMUL / FADD / SHFL / PRMT. Static counts, not a timing: the loop runs the same
number of times in every kernel here (cdiv(K, BK)), so the counts compare the work per iteration.

The Triton version matters: run it with the H200's (3.6; a side venv with the triton 3.6.0 wheel and CAKE
installed editable) to count the code the H200 runs. Its counts and registers match the H200's own PTX
assembled by ptxas (session 4: 1257 / 255 registers lowered_norms, 776 / 220 hand-written), where Triton 3.9's
differ widely (956 vs 938 for the same two kernels). The JSON records the version.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCHEDULES = {"lowered_plain": REPO / "experiments/kmeans/assign_plain.cake",
             "lowered_norms": REPO / "experiments/kmeans/assign_plain_norms.cake"}
SHAPE = {"B": 2, "N": 4096, "K": 1024, "D": 128}  # the cell's D and K; B and N change no specialization
_INSTR = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)")


def loop_opcodes(sass: str) -> tuple[int, collections.Counter[str]]:
    """(instructions in the main loop, opcode counts there) of one kernel's SASS."""
    instrs = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in map(_INSTR.match, sass.splitlines()) if m]
    best: list[str] = []
    for address, op, rest in instrs:
        target = re.search(r"0x([0-9a-f]+)", rest) if op.startswith("BRA") else None
        if target is None or int(target.group(1), 16) >= address:
            continue
        body = [o for a, o, _ in instrs if int(target.group(1), 16) <= a <= address]
        if any(o.startswith("HGMMA") for o in body) and len(body) > len(best):
            best = body
    if not best:
        raise SystemExit("no loop with an HGMMA found: was the kernel compiled for sm_90a?")
    return len(best), collections.Counter(o.split(".")[0] for o in best)


def compiled_kernels(params: dict[str, int], dtype: Any) -> dict[str, Any]:
    """`contestant.launch` -> Triton's CompiledKernel for sm_90a, for both lowered schedules and the hand kernel."""
    import torch
    import triton
    from cake.experiments.kmeans import triton_assign as hand
    from cake.lowering.runtime import load, lower, read_schedule
    from cake.lowering.triton.aot import RecordedCall, compile_launches, specialization
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    x = torch.randn(SHAPE["B"], SHAPE["N"], SHAPE["D"]).to(dtype)
    c = torch.randn(SHAPE["B"], SHAPE["K"], SHAPE["D"]).to(dtype)
    out: dict[str, Any] = {}
    for label, path in SCHEDULES.items():
        kernel, text = read_schedule(path)
        loaded = load(lower(kernel, "triton", params=params, filename=str(path), source_text=text))
        out.update({f"{label}.{name}": k for name, k in compile_launches(loaded, (x, c), "sm_90a")})
    x, c, csq = hand.prepare(x, c)
    ids = torch.empty(SHAPE["B"], SHAPE["N"], dtype=torch.int32)
    bd, one_chunk = hand.chunk_for(SHAPE["D"])
    args = (x, c, csq, ids, SHAPE["N"], SHAPE["K"], SHAPE["D"], *x.stride(), *c.stride(), csq.stride(0), *ids.stride())
    kwargs = {"BN": params["BN"], "BK": params["BK"], "BD": bd, "ONE_CHUNK": one_chunk,
              "EVEN_D": one_chunk and bd == SHAPE["D"], "PRECISION": "ieee" if dtype == torch.float32 else "tf32",
              "num_warps": params["WARPS"], "num_stages": params["STAGES"]}
    spec = specialization(RecordedCall("hand", hand._assign_kernel, args, kwargs))
    source = ASTSource(hand._assign_kernel, spec.signature, spec.constexprs, spec.attrs)
    out["hand_triton.assign"] = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=spec.options)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON to write")
    parser.add_argument("--config", default="128,128,4,2", help="BN,BK,WARPS,STAGES")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--dump", type=Path, help="write SASS, PTX and TTGIR of every kernel here")
    args = parser.parse_args(argv)
    import torch
    from cake.lowering.triton.aot import _cubin_usage, disassemble

    bn, bk, warps, stages = (int(v) for v in args.config.split(","))
    params = {"BN": bn, "BK": bk, "WARPS": warps, "STAGES": stages}
    rows: dict[str, Any] = {}
    for name, kernel in compiled_kernels(params, getattr(torch, args.dtype)).items():
        sass = disassemble(kernel.asm["cubin"])
        if sass is None:
            print("no cuobjdump (Triton's bundled one or the CUDA toolkit's): nothing to count", file=sys.stderr)
            return 2
        registers, spills = _cubin_usage(kernel.asm["cubin"])
        row: dict[str, Any] = {"registers": registers, "spill_bytes": spills, "shared_bytes": kernel.metadata.shared}
        if "HGMMA" in sass:
            row["loop_instructions"], ops = loop_opcodes(sass)
            row["loop_opcodes"] = dict(ops.most_common())
        rows[name] = row
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / f"{name}.sass").write_text(sass)
            for kind in ("ptx", "ttgir"):
                (args.dump / f"{name}.{kind}").write_text(kernel.asm[kind])
    print(f"sm_90a, {args.dtype}, BN={bn} BK={bk} warps={warps} stages={stages}, D={SHAPE['D']}")
    print(f"{'kernel':<42} {'regs':>5} {'spill':>5} {'smem B':>7} {'loop':>5}  top opcodes in the loop")
    for name, row in rows.items():
        top = ", ".join(f"{k}:{v}" for k, v in list(row.get("loop_opcodes", {}).items())[:10])
        print(f"{name:<42} {row['registers']!s:>5} {row['spill_bytes']!s:>5} {row['shared_bytes']!s:>7} "
              f"{row.get('loop_instructions', '-')!s:>5}  {top}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    import triton

    args.out.write_text(json.dumps({"config": params, "dtype": args.dtype, "shape": SHAPE,
                                    "triton": triton.__version__, "kernels": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
