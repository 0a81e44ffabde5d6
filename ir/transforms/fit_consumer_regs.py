"""fit_consumer_regs: the mma roles of a `setmaxnreg` kernel given the register file the other roles leave.

Precondition: the target has setmaxnreg, every role that issues no mma declares a budget that evaluates at the
param defaults, and some role issues mma. Effect: each mma role's budget becomes the largest setmaxnreg count
(`cake.arch`) that all their threads can take from what the SM's register file has left; where that budget is
a param (`CONSUMER_REGS`), the param's default moves there (its domain, the search's space, is unchanged),
else the literal is rewritten. None when the precondition fails or the budgets already are that.

Warp specialization and consumer splitting end with this pass: more consumer threads, or a copy warpgroup
that hands registers back, change what each consumer can hold.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms.bind_params import in_domain
from cake.ir.transforms.sites import issues_mma, main_launch, register_budgets, target_spec
from cake.ir.visit import with_launch

from cake.arch import Feature


def consumer_budget(kernel: n.Kernel) -> int | None:
    """The largest setmaxnreg budget the mma roles can all take while the other roles keep theirs; None where
    registers are not given out that way (no setmaxnreg, or a copy role without a declared budget)."""
    spec = target_spec(kernel)
    if spec is None or not spec.has(Feature.SETMAXNREG):
        return None
    launch = main_launch(kernel)
    env = analysis.default_env(kernel)
    fixed = mma_threads = 0
    for role in launch.roles:
        replicas = analysis.try_value_of(lambda e, r=role: analysis.role_replicas(r, e), env)
        per = analysis.try_value_of(lambda e, r=role: analysis.role_threads_per_instance(r, e), env)
        if replicas is None or per is None:
            return None
        if issues_mma(role):
            mma_threads += replicas * per
        elif role.regs is None or (regs := analysis.try_value(role.regs, env)) is None:
            return None
        else:
            fixed += replicas * per * regs
    if not mma_threads:
        return None
    pool = analysis.try_value_of(lambda e: analysis.register_pool(launch, e, spec).registers, env)
    if pool is None:
        return None
    share = min((pool - fixed) // mma_threads, spec.registers_per_thread_max)
    fitting = [r for r in register_budgets(kernel) if r <= share]
    return fitting[-1] if fitting else None


def fit_consumer_regs(kernel: n.Kernel) -> n.Kernel | None:
    budget = consumer_budget(kernel)
    if budget is None:
        return None
    launch = main_launch(kernel)
    out = kernel
    roles = []
    for role in launch.roles:
        if issues_mma(role):
            param = kernel.param(role.regs.id) if isinstance(role.regs, n.Name) else None
            if param is not None:
                if param.default != budget and in_domain(param.domain, budget):
                    out = replace(out, params=tuple(replace(p, default=budget) if p.name == param.name else p
                                                    for p in out.params))
            elif role.regs != n.IntLit(budget):
                role = replace(role, regs=n.IntLit(budget))
        roles.append(role)
    if tuple(roles) != launch.roles:
        out = with_launch(out, next(lc for lc in out.launches if lc.name == launch.name),
                          replace(launch, roles=tuple(roles)))
    return None if out == kernel else out
