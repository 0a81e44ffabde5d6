"""Where the structural passes apply: the launch that does the op's work, its mma statements, the shared
buffers an mma reads, and the target facts (from `cake.arch`) the passes size things by.

Queries only; no pass lives here. The agents read the same helpers to choose a site before calling a pass.
"""

from __future__ import annotations

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.visit import walk_body
from cake.ir.visit import walk_stmts as walk

from cake.arch import ARCHS, ArchSpec, Feature, UnknownArchError
from cake.arch import arch as arch_spec


def target_spec(kernel: n.Kernel) -> ArchSpec | None:
    """The kernel's target from `cake.arch`, None when the target is not in the table."""
    try:
        return arch_spec(kernel.target)
    except UnknownArchError:
        return None


def has_feature(kernel: n.Kernel, feature: Feature) -> bool:
    spec = target_spec(kernel)
    return spec is not None and spec.has(feature)


def main_launch(kernel: n.Kernel) -> n.Launch:
    """The launch that does the op's heavy work: the one with the most mma statements (ties: the last)."""
    best = kernel.launches[-1]
    best_count = -1
    for launch in kernel.launches:
        stmts = [site.stmt for role in launch.roles for site in walk_body(role.body)]
        count = sum(1 for s in stmts if isinstance(getattr(s, "value", None), n.Mma) or isinstance(s, n.MmaAsync))
        if count >= best_count:
            best, best_count = launch, count
    return best


def mma_sites(launch: n.Launch) -> list[n.Let]:
    return [s for r in launch.roles for s in walk(r.body) if isinstance(s, n.Let) and isinstance(s.value, n.Mma)]


def smem_of(launch: n.Launch, expr: n.Expr) -> n.SmemDecl | None:
    name = analysis.ref_name(expr)
    return next((b for b in launch.smem if b.name == name), None)


def issues_mma(role: n.Role) -> bool:
    return any(isinstance(getattr(s, "value", None), n.Mma) for s in walk(role.body))


def issues_wgmma(role: n.Role) -> bool:
    return any(isinstance(s, n.Let) and isinstance(s.value, n.Mma) and s.value.form.startswith("wgmma.")
               for s in walk(role.body))


def register_budgets(kernel: n.Kernel) -> tuple[int, ...]:
    """The per-thread register budgets a role may declare on the kernel's target: the counts setmaxnreg takes,
    capped at the per-thread maximum (an unknown target: those of the first table entry with setmaxnreg)."""
    spec = target_spec(kernel)
    if spec is None or not spec.has(Feature.SETMAXNREG):
        spec = next(a for a in ARCHS.values() if a.has(Feature.SETMAXNREG))
    return tuple(v for v in spec.setmaxnreg_values if v <= spec.registers_per_thread_max)


def param_names(kernel: n.Kernel) -> set[str]:
    return {p.name for p in kernel.params}
