"""How a pass changes the innermost loop a schedule's CUDA code issues, read off SASS (CPU only, nvcc here).

    python3 scripts/pass_kloop_sass.py SCHEDULE --pass defer_merge [--json OUT]
    python3 scripts/pass_kloop_sass.py assign_pingpong --pass defer_merge

`experiments/kmeans/SCHEDULE.cake` and the pass's output (`cake.ir.transforms.PASS`) are each lowered by the CUDA
backend at D = 128 in bf16 and compiled with the repo's nvcc path; `nvdisasm --print-line-info` (scripts/
cuda_kloop_sass.py finds it) attributes each instruction to a generated source line. The loop counted is the
innermost loop whose instructions come mostly from the last `for (int k = 0; ...)` of the source (a ping-pong's
consumer k loop): its static instruction count and opcodes, once per iteration. Static counts of one compile, not a
timing.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from cake.ir.nodes import DType, Kernel
from cake.ir.parser import parse
from cake.lowering.cuda.compile import compile_cubin
from cake.lowering.cuda.program import generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_kloop_sass import functions, nvdisasm, opcode  # noqa: E402  (a sibling script)

ROOT = Path(__file__).resolve().parents[1]


def loop_counts(kernel: Kernel, tag: str) -> dict[str, object]:
    program = generate(kernel, kernel.target, dtypes={v.name: DType.BF16 for v in kernel.dtype_vars},
                       static_dims={d.name: 128 for d in kernel.dims if d.static}, file=tag)
    module = compile_cubin(program.source, program.arch,
                           smem_dynamic_bytes={c.kname: c.smem_bytes for c in program.launches},
                           tmem_columns={c.kname: c.tmem_columns for c in program.launches}, file=tag)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(module.cubin)
        sass = subprocess.run([nvdisasm(), "--print-line-info", "-c", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    lines = program.source.splitlines()
    start = max(i for i, text in enumerate(lines, 1) if text.strip().startswith("for (int k = 0;"))
    indent = len(lines[start - 1]) - len(lines[start - 1].lstrip())
    end = next(i for i in range(start + 1, len(lines) + 1)
               if lines[i - 1].strip() == "}" and len(lines[i - 1]) - len(lines[i - 1].lstrip()) == indent)
    best: list[tuple[str, int]] | None = None
    for instructions, labels in functions(sass):
        for i, (text, _) in enumerate(instructions):
            m = re.search(r"BRA.*`\(\.(L_x_\d+)\)", text)
            if m and labels.get(m.group(1), i) < i:
                body = instructions[labels[m.group(1)]:i + 1]
                own = sum(start <= line <= end for _, line in body)
                if own > len(body) / 2 and (best is None or len(body) < len(best)):
                    best = body
    if best is None:
        raise SystemExit(f"{tag}: no loop of the generated source's last k loop in the SASS")
    counts = collections.Counter(opcode(text) for text, _ in best)
    return {"instructions": len(best), "shuffles": counts["SHFL"], "opcodes": dict(counts.most_common())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("schedule")
    ap.add_argument("--pass", dest="pass_name", required=True, help="a module of cake.ir.transforms")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    kernel = parse((ROOT / "experiments" / "kmeans" / f"{args.schedule}.cake").read_text(), args.schedule)
    transform = getattr(importlib.import_module(f"cake.ir.transforms.{args.pass_name}"), args.pass_name)
    changed = transform(kernel)
    if changed is None:
        raise SystemExit(f"{args.pass_name} does not apply to {args.schedule}")
    result = {"schedule": args.schedule, "pass": args.pass_name,
              "before": loop_counts(kernel, args.schedule), "after": loop_counts(changed, args.schedule)}
    for which in ("before", "after"):
        r = result[which]
        print(f"{which:6} k loop: {r['instructions']} instructions an iteration, {r['shuffles']} SHFL")  # type: ignore[index]
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
