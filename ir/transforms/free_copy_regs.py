"""free_copy_regs: the registers of roles that only move data handed to the mma roles.

Under setmaxnreg the SM's register file is one pool split between the roles. A role that issues no mma and binds
no tile (a TMA copy producer: its loops, waits, copies and arrives live in a few scalar registers) needs no more
than the smallest budget setmaxnreg takes; whatever it declares above that is taken from the roles that hold the
accumulators. A transform that raises what a consumer keeps live (`hold_operand`: a held operand tile next to the
accumulator) ends with this pass, so the registers it costs come from where they are idle rather than from a
spill.

Precondition: the target has setmaxnreg, and some role of the main launch issues no mma, binds no tile (no
`let`) and declares a budget above the smallest that both setmaxnreg (`cake.arch`) and, where the budget is a
param, the param's domain allow. Effect: that budget drops to that smallest value (a param's default moves, its
domain is unchanged; a literal is rewritten), then the mma roles take what it freed (`fit_consumer_regs`). None
when no role qualifies.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms import apply
from cake.ir.transforms.bind_params import in_domain
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.sites import issues_mma, main_launch, target_spec
from cake.ir.visit import walk_body, with_launch

from cake.arch import Feature


def _binds_tiles(role: n.Role) -> bool:
    return any(isinstance(site.stmt, n.Let) for site in walk_body(role.body))


def _floor(kernel: n.Kernel, role: n.Role, minimum: int) -> int | None:
    """The smallest budget `role` may declare: setmaxnreg's minimum, or the least value of its param's domain
    at or above it (None: a budget written as an expression, or a param an mma role's budget shares)."""
    if isinstance(role.regs, n.IntLit):
        return minimum
    param = kernel.param(role.regs.id) if isinstance(role.regs, n.Name) else None
    if param is None or any(r.regs == role.regs for r in main_launch(kernel).roles if issues_mma(r)):
        return None  # not a param, or one an mma role's budget reads too
    allowed = [v for v in analysis.domain_values(kernel, param.name) if v >= minimum and in_domain(param.domain, v)]
    return min(allowed) if allowed else None


def free_copy_regs(kernel: n.Kernel) -> n.Kernel | None:
    spec = target_spec(kernel)
    if spec is None or not spec.has(Feature.SETMAXNREG):
        return None
    launch = main_launch(kernel)
    env = analysis.default_env(kernel)
    out, roles = kernel, []
    for role in launch.roles:
        current = analysis.try_value(role.regs, env)
        floor = None if issues_mma(role) or _binds_tiles(role) or current is None else \
            _floor(kernel, role, spec.setmaxnreg_min_registers)
        if floor is not None and floor < current:
            if isinstance(role.regs, n.Name):
                out = replace(out, params=tuple(replace(p, default=floor) if p.name == role.regs.id else p
                                                for p in out.params))
            else:
                role = replace(role, regs=n.IntLit(floor))
        roles.append(role)
    if tuple(roles) != launch.roles:
        out = with_launch(out, next(lc for lc in out.launches if lc.name == launch.name),
                          replace(launch, roles=tuple(roles)))
    return None if out == kernel else apply(fit_consumer_regs, out)
