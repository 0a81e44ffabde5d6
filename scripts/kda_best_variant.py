"""The fastest variant of a `scripts/gpu_kda_profile.py` report, written out as a schedule whose param defaults are it.

    python3 scripts/kda_best_variant.py PROFILE.json --shape h96_fixed --write BEST.cake

`cake verify` checks a schedule at its param defaults, so a GPU stage that profiles several variants and then
verifies the best-looking one needs that variant as a file: the profiled schedule with the winner's params as its
defaults (each value must lie in its param's domain: the copy is parsed and checked before it is written).
Prints the ranking (ms of kernels per call, fastest first) and the winner.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any


def ranking(report: dict[str, Any], shape: str) -> list[tuple[float, str]]:
    """(ms of kernels per call, params JSON) of every variant of the schedule profiled at `shape`, fastest first."""
    stem = Path(report["schedule"]).stem
    rows = report["shapes"].get(shape)
    if rows is None:
        raise SystemExit(f"the report has no shape `{shape}` (it has {', '.join(report['shapes'])})")
    ranked = []
    for params in report["params"]:
        name = stem if params is None else f"{stem} {params}"
        if name in rows:
            ranked.append((sum(r["ms_per_call"] for r in rows[name]), params or "{}"))
    if not ranked:
        raise SystemExit(f"no variant of {stem} was profiled at {shape}")
    return sorted(ranked)


def with_defaults(text: str, params: dict[str, int]) -> str:
    """`text` with each named param's default replaced (`param NAME = OLD in {...}` -> `= NEW`)."""
    for name, value in params.items():
        text, count = re.subn(rf"^(param\s+{re.escape(name)}\s*=\s*)\S+(\s+in\b)", rf"\g<1>{value}\g<2>", text,
                              flags=re.MULTILINE)
        if count != 1:
            raise SystemExit(f"the schedule declares no `param {name} = ... in {{...}}` to rebind")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/kda_best_variant.py", description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="a gpu_kda_profile.py --out JSON")
    parser.add_argument("--shape", default="h96_fixed")
    parser.add_argument("--write", type=Path, required=True, help="the schedule with the winner's params as defaults")
    parser.add_argument("--schedule", type=Path, help="the profiled schedule (default: the one the report names)")
    args = parser.parse_args(argv)
    from cake.ir.check import check_text, errors

    report = json.loads(args.profile.read_text())
    ranked = ranking(report, args.shape)
    for ms, params in ranked:
        print(f"  {ms:8.3f} ms  {params}")
    best = ranked[0][1]
    source = args.schedule or Path(report["schedule"])
    text = with_defaults(source.read_text(), json.loads(best))
    refused = errors(check_text(text, str(args.write), backend="triton"))
    if refused:
        raise SystemExit(f"the winner's params do not check: {refused[0]}")
    args.write.write_text(text)
    print(f"best at {args.shape}: {best} ({ranked[0][0]:.3f} ms); wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
