"""The fastest variant of a `scripts/gpu_kda_profile.py` report, written out as a schedule whose param defaults are it.

    python3 scripts/kda_best_variant.py PROFILE.json --shape h96_fixed --write BEST.cake [--per-launch]

`cake verify` checks a schedule at its param defaults, so a GPU stage that profiles several variants and then
verifies the best-looking one needs that variant as a file: the profiled schedule with the winner's params as its
defaults (each value must lie in its param's domain: the copy is parsed and checked before it is written).
Prints the ranking (ms of kernels per call, fastest first) and the winner.

`--per-launch` composes the winner launch by launch instead: a schedule's launches are separate kernels, so a
param that only one launch reads (intra's warps, recur's V tile) changes only that launch's time. Per launch, the
variant whose kernel of that launch ran fastest gives that launch's own params; a param read outside one launch
(the chunk C, which sizes scratch and both grids) keeps its default, and variants binding one are left out of
the composition (they are still ranked). The composed variant as a whole was not profiled: say so beside it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any


def row_name(stem: str, params: str | None) -> str:
    """A variant's row in the report: gpu_kda_profile.variant_name's (that module imports torch; this one runs
    without it)."""
    return stem if params is None else f"{stem} {params}"


def ranking(report: dict[str, Any], shape: str) -> list[tuple[float, str]]:
    """(ms of kernels per call, params JSON) of every variant of the schedule profiled at `shape`, fastest first."""
    stem = Path(report["schedule"]).stem
    rows = report["shapes"].get(shape)
    if rows is None:
        raise SystemExit(f"the report has no shape `{shape}` (it has {', '.join(report['shapes'])})")
    ranked = []
    for params in report["params"]:
        name = row_name(stem, params)
        if name in rows:
            ranked.append((sum(r["ms_per_call"] for r in rows[name]), params or "{}"))
    if not ranked:
        raise SystemExit(f"no variant of {stem} was profiled at {shape}")
    return sorted(ranked)


def launch_params(text: str, path: str) -> dict[str, frozenset[str]]:
    """Per launch, the params only that launch reads (nothing outside it: not the scratch, not another launch)."""
    from cake.ir.parser import parse
    from cake.ir.visit import identifiers

    kernel = parse(text, path)
    params = {p.name for p in kernel.params}
    inside = {launch.name: params & set(identifiers(launch)) for launch in kernel.launches}
    outside_launches = params & set(identifiers((kernel.tensors, kernel.scratch, kernel.dims, kernel.fusions)))
    own: dict[str, frozenset[str]] = {}
    for name, used in inside.items():
        elsewhere = set().union(*(other for n, other in inside.items() if n != name)) | outside_launches
        own[name] = frozenset(used - elsewhere)
    return own


def per_launch(report: dict[str, Any], shape: str, own: dict[str, frozenset[str]]) -> dict[str, int]:
    """Each launch's own params from the variant whose kernel of that launch ran fastest at `shape` (variants
    binding a param no single launch owns are left out); the composed bindings, defaults left unbound."""
    stem = Path(report["schedule"]).stem
    rows = report["shapes"][shape]
    owned = set().union(*own.values())
    composed: dict[str, int] = {}
    for launch, names in own.items():
        timed = []
        for params in report["params"]:
            bound = json.loads(params or "{}")
            row = rows.get(row_name(stem, params))
            kernel = [r["ms_per_call"] for r in row or () if r["kernel"].endswith(f"_{launch}")]
            if kernel and set(bound) <= owned:
                timed.append((sum(kernel), {k: v for k, v in bound.items() if k in names}))
        if not timed:
            raise SystemExit(f"no variant of {stem} has a kernel of launch `{launch}` profiled at {shape}")
        ms, chosen = min(timed, key=lambda t: t[0])
        print(f"  launch {launch}: {ms:.3f} ms with {json.dumps(chosen) if chosen else 'its defaults'}")
        composed.update(chosen)
    return composed


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
    parser.add_argument("--per-launch", action="store_true",
                        help="compose each launch's fastest params (see above) instead of the fastest variant")
    args = parser.parse_args(argv)
    from cake.ir.check import check_text, errors

    report = json.loads(args.profile.read_text())
    ranked = ranking(report, args.shape)
    for ms, params in ranked:
        print(f"  {ms:8.3f} ms  {params}")
    source = args.schedule or Path(report["schedule"])
    if args.per_launch:
        best = json.dumps(per_launch(report, args.shape, launch_params(source.read_text(), str(source))))
        how = "composed launch by launch, not profiled as a whole"
    else:
        best, how = ranked[0][1], f"{ranked[0][0]:.3f} ms"
    text = with_defaults(source.read_text(), json.loads(best))
    refused = errors(check_text(text, str(args.write), backend="triton"))
    if refused:
        raise SystemExit(f"the winner's params do not check: {refused[0]}")
    args.write.write_text(text)
    print(f"best at {args.shape}: {best} ({how}); wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
