"""as_warpgroups: a role counted in warps regrouped into warpgroups (4 warps each), as wgmma and setmaxnreg need.

`role consumer: warps 8` becomes `role consumer: warpgroups 2`; the thread count is unchanged. A role whose
warp count at the param defaults is not a multiple of a warpgroup cannot be regrouped.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.visit import with_role


def regrouped(role: n.Role, env: analysis.Env) -> n.Role | None:
    """`role` in warpgroups (itself when it already is); None when its warps do not fill whole warpgroups."""
    if role.unit is n.UnitKind.WARPGROUPS:
        return role
    warps = analysis.try_value(role.units, env)
    if warps is None or warps % analysis.WARPS_PER_WARPGROUP:
        return None
    return replace(role, unit=n.UnitKind.WARPGROUPS, units=n.IntLit(warps // analysis.WARPS_PER_WARPGROUP))


def as_warpgroups(kernel: n.Kernel, role: str, launch: str | None = None) -> n.Kernel | None:
    """`kernel` with role `role` (of `launch`, default: every launch that has it) in warpgroups; None when
    there is nothing to regroup or it cannot be regrouped."""
    env = analysis.default_env(kernel)
    out = kernel
    for lc in kernel.launches:
        old = lc.role(role)
        if old is None or (launch is not None and lc.name != launch):
            continue
        new = regrouped(old, env)
        if new is None:
            return None
        if new is not old:
            current = next(x for x in out.launches if x.name == lc.name)
            out = with_role(out, current, current.role(role), new)  # type: ignore[arg-type]
    return None if out is kernel else out
