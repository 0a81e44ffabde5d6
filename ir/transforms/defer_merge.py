"""defer_merge: merge a running row minimum across the threads that share a row once, after its loop.

A role that carries a row minimum (maximum) and its position through a loop (`cake.ir.running_reduction`) merges
each iteration's partial results across the threads holding a row (a wgmma fragment's quad of lanes, warps that
split the columns) before it compares them with the running value. Comparing each thread's partial with its own
running partial and merging once after the loop gives the same values (ties to the first position) with no
cross-thread step in the loop: the epilogue's shape, for the search to try. Nothing here comes from a reference
kernel: the hand-written schedules merge every iteration.

Precondition: some role has a running reduction not yet deferred. Effect: `defer ROLE value[, position]` for each
such reduction of each launch. None when there is none.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import nodes as n
from cake.ir.running_reduction import running_reductions
from cake.ir.visit import with_launch


def deferrable(launch: n.Launch) -> list[n.Defer]:
    """The `defer` lines `launch` could add: one per running reduction of a role that it does not defer yet."""
    done = {(d.role, d.names[0]) for d in launch.defers}
    out = []
    for role in launch.roles:
        for found in running_reductions(role):
            if (role.name, found.value) not in done:
                names = (found.value,) if found.index is None else (found.value, found.index)
                out.append(n.Defer(role.name, names))
                done.add((role.name, found.value))
    return out


def defer_merge(kernel: n.Kernel) -> n.Kernel | None:
    out = kernel
    for launch in kernel.launches:
        added = deferrable(launch)
        if added:
            current = next(lc for lc in out.launches if lc.name == launch.name)
            out = with_launch(out, current, replace(current, defers=(*current.defers, *added)))
    return None if out is kernel else out
