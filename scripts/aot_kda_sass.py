"""Where a KDA launch's instructions go, per params variant, compiled for sm_90a on a CPU (no GPU needed).

    python3 scripts/aot_kda_sass.py --out OUT.json [--schedule FILE.cake] [--launch intra]
        [--trips 4,4,4] [--params JSON [JSON ...]] [--dump DIR]

Each variant's launches are compiled ahead of time (`cake.lowering.triton.aot`) at the benchmark's K = V = 128 in
bf16 and disassembled. The SASS of the chosen launch is split at its loops (a loop: a backward branch and the code
it jumps back over) and counted by instruction class in each region: tensor-core instructions (HMMA: the tf32x3
products, two HMMA.1684 per m16n8k8), block barriers (BAR: every cross-warp step — a scan or reduction over rows,
an operand's layout change through shared memory — stops the whole program there), shared-memory traffic, warp
shuffles, special functions (MUFU: exp, rcp, rsqrt), spill traffic (LDL/STL). With `--trips` (one count per loop,
in code order) the per-program counts multiply each loop body by its trip count: the instructions one warp issues
for one program, which at two programs an SM (255 registers) is latency, not throughput.

Static counts, not a timing, and the Triton version matters: run it with the H200's Triton (3.6) to count the
code the H200 runs (`scripts/aot_triton_vs_hand.py` says why: a side venv with --system-site-packages, the
triton 3.6.0 wheel and CAKE installed editable); the JSON records the version. Run it in a process without
TRITON_INTERPRET: Triton's compiler does not run under the interpreter.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCHEDULE = REPO / "experiments/kda/kda_fused_chunkpar.cake"
# the benchmark's head dims and dtype; B, T and H change no specialization of the compiled kernels
HEAD_DIM, BATCH, TOKENS, HEADS = 128, 1, 100, 2
_INSTR = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)")
_TARGET = re.compile(r"0x([0-9a-f]+)")
# instruction classes reported per region: (name, opcodes whose first dotted part is one of these)
CLASSES: dict[str, tuple[str, ...]] = {
    "hmma": ("HMMA", "HGMMA"), "bar": ("BAR",), "shared": ("LDS", "STS", "LDSM"), "shfl": ("SHFL",),
    "mufu": ("MUFU",), "spill": ("LDL", "STL"), "global": ("LDG", "STG", "LDGSTS"),
}


@dataclass(frozen=True, slots=True)
class Instruction:
    address: int
    opcode: str
    operands: str


@dataclass(slots=True)
class Region:
    """A straight stretch of code or one loop's body: [start, end) in bytes, instructions by class."""

    start: int
    end: int
    loop: bool
    total: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    # the loops (indices into `loops(code)`, outermost first) whose bodies hold this stretch; `loop` = any
    within: tuple[int, ...] = ()


def instructions(sass: str) -> list[Instruction]:
    return [Instruction(int(m.group(1), 16), m.group(2), m.group(3))
            for m in map(_INSTR.match, sass.splitlines()) if m]


def loops(code: list[Instruction]) -> list[tuple[int, int]]:
    """(first address, address after the branch) of each loop, in code order (an outer loop before the loops
    nested in it): a branch back to an earlier address. Loops may nest (a loop inside another's body, as Triton
    emits a schedule's nested `for`); two loops that overlap without nesting are reported, not guessed at."""
    found = set()
    for ins in code:
        target = _TARGET.search(ins.operands) if ins.opcode.split(".")[0] == "BRA" else None
        if target and int(target.group(1), 16) < ins.address:
            found.add((int(target.group(1), 16), ins.address + 16))
    ordered = sorted(found, key=lambda span: (span[0], -span[1]))
    for i, (_, end) in enumerate(ordered):
        for inner_start, inner_end in ordered[i + 1:]:
            if inner_start < end < inner_end:
                raise ValueError(f"overlapping loops at {inner_start:#x}: split them by hand")
    return ordered


def regions(code: list[Instruction]) -> list[Region]:
    """The code cut at every loop's ends: straight stretches and loop bodies (or the parts of an outer loop's body
    between its inner loops), in address order, each with the loops that hold it."""
    spans = loops(code)
    cuts = sorted({0, *(a for span in spans for a in span), (code[-1].address + 16) if code else 0})
    out = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        within = tuple(i for i, (lo, hi) in enumerate(spans) if lo <= start and end <= hi)
        region = Region(start, end, bool(within), within=within)
        counts = collections.Counter(ins.opcode.split(".")[0] for ins in code if start <= ins.address < end)
        region.total = sum(counts.values())
        region.classes = {name: sum(counts[o] for o in ops) for name, ops in CLASSES.items()}
        out.append(region)
    return out


def per_program(parts: list[Region], trips: list[int]) -> dict[str, int]:
    """Instructions one warp issues for one program: each stretch times the trip counts of the loops that hold it
    (`trips`: one count per loop in code order, a nested loop's count per entry into it)."""
    count = 1 + max((i for r in parts for i in r.within), default=-1)
    if len(trips) != count:
        raise ValueError(f"--trips gives {len(trips)} counts for {count} loops")
    totals: collections.Counter[str] = collections.Counter()
    for region in parts:
        times = math.prod(trips[i] for i in region.within)
        totals["total"] += times * region.total
        for name, count in region.classes.items():
            totals[name] += times * count
    return dict(totals)


def inputs(dtype: Any, tokens: int = TOKENS, heads: int = HEADS, tables: int | None = None) -> list[Any]:
    """The call's inputs at (BATCH, tokens, heads); with `tables` (a varlen-native schedule's chunk C) one
    sequence of every token and the tables experiments/kda/adapt.py builds for it, after h0."""
    import torch

    rows = [torch.randn(BATCH, tokens, heads, HEAD_DIM).to(dtype) for _ in range(4)]
    given = [*rows, torch.randn(BATCH, tokens, heads).to(dtype), torch.zeros(heads), torch.zeros(heads, HEAD_DIM),
             torch.zeros(BATCH, heads, HEAD_DIM, HEAD_DIM)]
    if tables is None:
        return given
    from cake.experiments.kda.adapt import sequence_tables

    return [*given, *sequence_tables(list(range(0, BATCH * tokens + 1, tokens)), tables, torch.device("cpu"))]


def variant(schedule: Path, launch: str, params: str, trips: list[int] | None, dump: Path | None,
            tokens: int = TOKENS, heads: int = HEADS) -> dict[str, Any]:
    import torch
    from cake.experiments.kda.adapt import VARLEN_TABLES
    from cake.lowering.runtime import load_schedule, read_schedule
    from cake.lowering.triton.aot import _cubin_usage, compile_launches, disassemble

    loaded = load_schedule(str(schedule), params=params)
    kernel, _ = read_schedule(schedule)
    varlen = all(kernel.tensor(name) for name in VARLEN_TABLES)
    chunk = loaded.lowered.param_dict["C"] if varlen else None
    compiled = dict(compile_launches(loaded, inputs(torch.bfloat16, tokens, heads, chunk), "sm_90a"))
    if launch not in compiled:
        raise SystemExit(f"no launch `{launch}` in {schedule.name}; it has {', '.join(compiled)}")
    kernel = compiled[launch]
    sass = disassemble(kernel.asm["cubin"])
    if sass is None:
        raise SystemExit("no cuobjdump (Triton's bundled one or the CUDA toolkit's): cannot disassemble")
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9]+", "_", params).strip("_") or "defaults"
        (dump / f"{launch}_{stem}.sass").write_text(sass)
        (dump / f"{launch}_{stem}.ttgir").write_text(kernel.asm["ttgir"])
    registers, spills = _cubin_usage(kernel.asm["cubin"])
    parts = regions(instructions(sass))
    row: dict[str, Any] = {"params": params, "registers": registers, "spill_bytes": spills,
                           "shared": kernel.metadata.shared, "static": sum(r.total for r in parts),
                           "regions": [asdict(r) for r in parts]}
    if trips is not None:
        row["per_program"] = per_program(parts, trips)
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    names = list(CLASSES)
    print(f"{'params':34} {'regs':>4} {'spill':>5} {'static':>6}  per program: {'total':>6} "
          + " ".join(f"{n:>6}" for n in names))
    for row in rows:
        each = row.get("per_program", {})
        print(f"{row['params'][:34]:34} {row['registers']!s:>4} {row['spill_bytes']!s:>5} {row['static']:>6}"
              f"               {each.get('total', '-')!s:>6} " + " ".join(f"{each.get(n, '-')!s:>6}" for n in names))
    for row in rows:
        print(f"-- {row['params']}: regions (loop bodies marked *, one a loop holding them)")
        for r in row["regions"]:
            mark = "*" * len(r["within"]) or " "
            print(f"   {mark:<3} {r['start']:#7x}-{r['end']:#7x} {r['total']:>5} "
                  + " ".join(f"{n} {r['classes'][n]}" for n in names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--schedule", type=Path, default=SCHEDULE)
    parser.add_argument("--launch", default="intra", help="the launch whose SASS is counted")
    parser.add_argument("--trips", help="trip count of each loop of that launch, in code order, a nested loop's per entry (e.g. 4,4,4)")
    parser.add_argument("--params", nargs="+", default=["{}"], help="one JSON object per variant")
    parser.add_argument("--dump", type=Path, help="also write each variant's SASS and TTGIR here")
    parser.add_argument("--tokens", type=int, default=TOKENS, help="T (its divisibility by 16 specializes the code: "
                        "h96_fixed's 8192 is, the default is not)")
    parser.add_argument("--heads", type=int, default=HEADS, help="H (likewise; h96_fixed's 96 is divisible by 16)")
    args = parser.parse_args(argv)
    import triton

    trips = [int(t) for t in args.trips.split(",")] if args.trips else None
    rows = [variant(args.schedule, args.launch, params, trips, args.dump, args.tokens, args.heads) for params in args.params]
    print_table(rows)
    args.out.write_text(json.dumps({"schedule": str(args.schedule), "launch": args.launch, "arch": "sm_90a",
                                    "triton": triton.__version__, "trips": trips, "tokens": args.tokens,
                                    "heads": args.heads, "variants": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
