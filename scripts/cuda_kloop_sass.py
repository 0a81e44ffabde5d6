"""Where the CUDA backend's plain k loop issues its instructions, read off SASS by generated source line (CPU only).

    python3 scripts/cuda_kloop_sass.py SCHEDULE PARAM=V ... [--dump DIR]
    python3 scripts/cuda_kloop_sass.py assign_plain BN=256 BK=32 WARPS=2 STAGES=1

The schedule (`experiments/kmeans/SCHEDULE.cake`, its params' defaults replaced) is lowered by the CUDA backend at
D = 128 in bf16, compiled with the repo's nvcc path (`-lineinfo` is among its flags) and disassembled with
`nvdisasm --print-line-info` (Triton's bundled copy, or the CUDA toolkit's). The k loop is the longest loop (a backward
branch and the code it jumps back over) of any launch; its instructions are counted by region of the generated source:

- `stage`: the `// 16-byte vectors` branch of the staged tile load in the loop (`lowering/cuda/stmts.py`), per
  LDG.E.128 in it (what `staged_load_ops_per_vector` in `ir/data/cost_calibration.json` prices);
- `butterfly`: the quad exchange that finishes a fragment min/argmin (`frag_reduce`: the `::col(` remap, the
  shuffles of `sm_30_intrinsics.hpp`, `cake_argmin_merge`), per fragment row a thread holds (`kRows`);
- everything else, by opcode.

Static counts of one compile, not a timing: both branches of an if are counted once each, and a loop inside the k
loop (the staging loop, unrolled 4 vectors; the row sum's chunk loop) once, whatever its trip count.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
from pathlib import Path

from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.lowering.cuda.backend import compile_target, specialize_for_call
from cake.lowering.cuda.compile import compile_cubin
from cake.lowering.cuda.program import generate

ROOT = Path(__file__).resolve().parents[1]
SCHEDULES = ROOT / "experiments" / "kmeans"
INTRINSICS = -1  # source line of an instruction from CUDA's shuffle intrinsics header
HEADER = -2  # any other header


def nvdisasm() -> str:
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import triton
    except ImportError:
        raise SystemExit("no nvdisasm (the CUDA toolkit's or Triton's bundled one)") from None
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    if not bundled.exists():
        raise SystemExit("no nvdisasm (the CUDA toolkit's or Triton's bundled one)")
    return str(bundled)


def build(schedule: str, params: dict[str, int], dump: Path) -> tuple[str, str]:
    """(generated source, SASS with line info) of `schedule` at `params`."""
    text = (SCHEDULES / f"{schedule}.cake").read_text()
    for name, value in params.items():
        text, hits = re.subn(rf"param {name} = \d+", f"param {name} = {value}", text)
        if not hits:
            raise SystemExit(f"{schedule} has no param {name}")
    kernel = parse(text, schedule)
    dtypes = {d.name: DType.BF16 for d in kernel.dtype_vars}
    statics = {d.name: 128 for d in kernel.dims if d.static}
    lowered = specialize_for_call(kernel, kernel.target, dtypes, statics, schedule)
    program = generate(lowered, kernel.target, dtypes=dtypes, static_dims=statics, file=schedule)
    compiled = compile_cubin(program.source, compile_target(kernel.target, (9, 0)),
                             smem_dynamic_bytes={c.kname: c.smem_bytes for c in program.launches},
                             tmem_columns={c.kname: c.tmem_columns for c in program.launches}, file=schedule)
    dump.mkdir(parents=True, exist_ok=True)
    (dump / "kernel.cu").write_text(program.source)
    (dump / "k.cubin").write_bytes(compiled.cubin)
    sass = subprocess.run([nvdisasm(), "--print-line-info", "-c", str(dump / "k.cubin")], capture_output=True,
                          text=True, check=True).stdout
    (dump / "k.sass").write_text(sass)
    return program.source, sass


def functions(sass: str) -> list[tuple[list[tuple[str, int]], dict[str, int]]]:
    """Per function: (instructions with their generated source line, label -> instruction index)."""
    out = []
    for part in sass.split("//--------------------- .text.")[1:]:
        instructions: list[tuple[str, int]] = []
        labels: dict[str, int] = {}
        line = 0
        for raw in part.splitlines():
            if m := re.match(r"^\.(L_x_\d+):", raw.strip()):
                labels[m.group(1)] = len(instructions)
            elif "//## File" in raw and (m := re.search(r"line (\d+)", raw)):
                line = int(m.group(1)) if "kernel.cu" in raw else INTRINSICS if "intrinsics" in raw else HEADER
            elif m := re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", raw):
                instructions.append((m.group(1), line))
        out.append((instructions, labels))
    return out


def opcode(instruction: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", instruction).split()[0].split(".")[0]


def k_loop(sass: str) -> list[tuple[str, int]]:
    """The longest loop (a backward branch and the code it jumps back over) of any function: the k loop."""
    best: list[tuple[str, int]] = []
    for instructions, labels in functions(sass):
        for i, (text, _) in enumerate(instructions):
            m = re.search(r"BRA.*`\(\.(L_x_\d+)\)", text)
            if m and labels.get(m.group(1), i) < i and i + 1 - labels[m.group(1)] > len(best):
                best = instructions[labels[m.group(1)]:i + 1]
    return best


def regions(source: str, body: list[tuple[str, int]]) -> dict[str, object]:
    lines = source.splitlines()
    loop = next(i for i, text in enumerate(lines, 1) if text.strip().startswith("for (int k = 0; k < cake_cdiv(K,"))
    vec = next(i for i in range(loop, len(lines)) if "// 16-byte vectors" in lines[i - 1])
    vec_end = next(i for i in range(vec, len(lines)) if lines[i - 1].strip().startswith("else {"))
    remap = next(i for i in range(vec_end, len(lines)) if re.search(r"_i\[cake_q\] = Frag_\w+::col\(", lines[i - 1]))
    merge_def = {i for i, text in enumerate(lines, 1) if "(v == best && i < best_i)" in text}
    frag = re.search(r"(Frag_\w+)::col\(", lines[remap - 1])
    assert frag is not None
    shape = next(re.search(r"kRegs = (\d+), kRows = (\d+), kCols = (\d+)", text) for text in lines
                 if "kRegs =" in text and frag.group(1) in lines[lines.index(text) - 1])
    assert shape is not None
    k_regs, k_rows, _ = (int(x) for x in shape.groups())
    counts: dict[str, collections.Counter[str]] = {r: collections.Counter() for r in ("stage", "butterfly", "other")}
    for text, line in body:
        if vec <= line < vec_end:
            region = "stage"
        elif line == INTRINSICS or remap <= line <= remap + 5 or line in merge_def:
            region = "butterfly"
        else:
            region = "other"
        counts[region][opcode(text)] += 1
    vectors = counts["stage"]["LDG"]
    return {"k_loop": len(body), "accumulators_a_thread": k_regs, "rows_a_thread": k_rows,
            "stage": sum(counts["stage"].values()), "stage_vectors": vectors,
            "stage_per_vector": sum(counts["stage"].values()) / max(1, vectors),
            "butterfly": sum(counts["butterfly"].values()), "butterfly_shuffles": counts["butterfly"]["SHFL"],
            "butterfly_per_row": sum(counts["butterfly"].values()) / k_rows,
            "opcodes": {r: dict(c.most_common()) for r, c in counts.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("schedule")
    ap.add_argument("params", nargs="*", help="NAME=VALUE")
    ap.add_argument("--dump", type=Path, default=None, help="where the source, cubin and SASS go")
    args = ap.parse_args(argv)
    params = {k: int(v) for k, v in (p.split("=", 1) for p in args.params)}
    dump = args.dump or Path("/tmp") / f"cake-sass-{args.schedule}-{'-'.join(f'{k}{v}' for k, v in params.items())}"
    source, sass = build(args.schedule, params, dump)
    report = regions(source, k_loop(sass))
    for key, value in report.items():
        print(f"{key}: {value:.2f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
