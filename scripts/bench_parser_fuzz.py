"""Fuzz the parser: malformed input must only ever produce diagnostics.

    python scripts/bench_parser_fuzz.py [--cases 10000] [--seed 0] [--json OUT]

Cases are seeded mutations of every `.cake` file in the repository (token deletions, insertions, swaps,
duplications, truncations, byte noise) plus random token soups and random unicode. Each case goes through
`parse_diagnostics` and `parse`; the script prints the count, how many parsed, how many gave diagnostics (by
code), how many crashed (any other exception — must be 0), and the time. Exit 1 on any crash.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cake.experiments.schedules import shipped_schedule_paths
from cake.ir.parser import keywords, parse, parse_diagnostics

from cake.diagnostics import DiagnosticError

ROOT = Path(__file__).resolve().parents[1]
_TOKEN = re.compile(r"#[^\n]*|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|->|\.\.|//|[<>=!]=|\s+|\S")
_EXTRA = ["->", "..", ".", ",", ":", ";", "[", "]", "(", ")", "{", "}", "+", "-", "*", "/", "//", "%", "<",
          "<=", "==", "!=", "=", "!", "&", "|", "0", "7", "128", "99999999999999999999", "1.5e3", "1e999", "x",
          "T", "f32", "bf16", "f8", "128B", "256B", "\n", "# c\n", "\t", "@", "$", "\u00a0", "\x00", "é"]


def _sources() -> list[str]:
    paths = [*shipped_schedule_paths(), *sorted((ROOT / "tests").rglob("*.cake"))]
    return [p.read_text(encoding="utf-8") for p in paths]


def _mutate(rng: random.Random, tokens: list[str], vocabulary: list[str]) -> list[str]:
    tokens = list(tokens)
    for _ in range(rng.randint(1, 4)):
        if not tokens:
            tokens.append(rng.choice(vocabulary))
            continue
        i = rng.randrange(len(tokens))
        kind = rng.randrange(6)
        if kind == 0:
            del tokens[i: i + rng.randint(1, 5)]
        elif kind == 1:
            tokens.insert(i, rng.choice(vocabulary))
        elif kind == 2:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == 3:
            tokens[i:i] = tokens[i: i + rng.randint(1, 8)]
        elif kind == 4:
            del tokens[i:]
        else:
            tokens[i] = rng.choice(vocabulary)
    return tokens


def _cases(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    sources = [_TOKEN.findall(text) for text in _sources()]
    vocabulary = sorted(keywords()) + _EXTRA
    makers: list[Callable[[], str]] = [
        lambda: "".join(_mutate(rng, rng.choice(sources), vocabulary)),
        lambda: "".join(_mutate(rng, rng.choice(sources), vocabulary)),
        lambda: "".join(_mutate(rng, rng.choice(sources), vocabulary)),
        lambda: " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 80))),
        lambda: "".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(0, 120))),
        # Deep nesting, which must become E0005 rather than a RecursionError.
        lambda: ("schedule s implements o\ntarget sm_90a\ngrid i in " + rng.choice("(-![")
                 * rng.randint(100, 5000) + "x\n"),
    ]
    return [rng.choice(makers)() for _ in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)

    cases = _cases(args.cases, args.seed)
    codes: Counter[str] = Counter()
    parsed = 0
    crashes: list[tuple[int, str]] = []
    start = time.perf_counter()
    for index, text in enumerate(cases):
        # The harness's one job is to count crashes, so here (and only here) any exception is caught,
        # recorded with its case index, reported, and turned into exit status 1.
        try:
            kernel, diagnostics = parse_diagnostics(text, "fuzz.cake")
            if kernel is None:
                codes.update(d.code for d in diagnostics[:1])
                try:
                    parse(text, "fuzz.cake")
                except DiagnosticError:
                    pass
            else:
                parsed += 1
        except Exception:  # noqa: BLE001 -- anything but DiagnosticError IS the finding: counted as a crash
            crashes.append((index, traceback.format_exc(limit=3)))
    elapsed = time.perf_counter() - start

    figures = {
        "cases": len(cases), "seed": args.seed, "parsed": parsed, "diagnostics": sum(codes.values()),
        "by_code": dict(sorted(codes.items())), "crashes": len(crashes), "seconds": round(elapsed, 2),
        "ms_per_case": round(1000 * elapsed / max(1, len(cases)), 3),
    }
    print(f"{figures['cases']} cases (seed {args.seed}): {parsed} parsed, {figures['diagnostics']} diagnostics "
          f"{figures['by_code']}, {len(crashes)} crashes, {elapsed:.1f} s ({figures['ms_per_case']} ms/case)")
    for index, trace in crashes[:5]:
        print(f"--- crash on case {index}:\n{trace}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
