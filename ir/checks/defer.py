"""E0415 — `defer ROLE value[, position]`: what a deferred merge needs (`cake.ir.running_reduction`).

Keeping a running row minimum as each thread's partial until its loop ends is exact only for a value updated by
`minimum` of a row reduction (with its position chosen by a strict comparison first) and read by nothing else in the
loop; anything else would read a thread's partial where the program means the row's value.
"""

from __future__ import annotations

from collections.abc import Iterable

from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import PINGPONG, derive
from cake.ir.checks.registry import Finding, check, finding
from cake.ir.running_reduction import RunningReduction, running_reduction

_DEFERRED = ("pingpong consumer around mma\n", "pingpong consumer around mma\ndefer consumer best, besti\n")


@check("E0415", "deferred merge of a value that is not a running reduction", "`defer {role} {names}`: {why}",
       examples=[derive(PINGPONG, ("pingpong consumer around mma\n", "pingpong consumer around mma\ndefer consumer besti\n")),
                 derive(PINGPONG, ("pingpong consumer around mma\n", "pingpong consumer around mma\ndefer producer best\n")),
                 derive(PINGPONG, _DEFERRED, ("  store besti ->", "  let first: i32[BN] = besti\n  store first ->"),
                        ("    best = minimum(m, best)\n", "    best = minimum(m, best)\n    let seen: f32[BN] = best\n"))])
def deferred_merge(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        seen: set[tuple[str, str]] = set()
        for defer in launch.defers:
            role = launch.role(defer.role)
            names = ", ".join(defer.names)
            why: str | None
            if role is None:
                why = f"launch `{launch.name}` has no role `{defer.role}`"
            else:
                found = running_reduction(role, defer.names)
                why = found if isinstance(found, str) else None
                if isinstance(found, RunningReduction) and (defer.role, found.value) in seen:
                    why = f"`{found.value}` is deferred twice"
                if isinstance(found, RunningReduction):
                    seen.add((defer.role, found.value))
            if why is not None:
                yield finding(defer, f"launch `{launch.name}`", "not a running reduction", role=defer.role, names=names,
                              why=why, help="defer a value updated as `v = minimum(m, v)` from `m = min(tile, axis=1)` "
                                            "(and its position as `i_v = where(m < v, i, i_v)` just before)")
