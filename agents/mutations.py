"""Mutation operators on typed kernels: each returns a new `Kernel` (via `dataclasses.replace`) or None
when it does not apply to this kernel.

Parametric operators move a param's default inside its domain (the default is the configuration that
runs, so this is how a schedule commits to a config). Structural operators change how the schedule works:
pipeline depth, copy mechanism, swizzle, persistent scheduling, register budgets, warp counts, ping-pong,
warp specialization (splitting a role into a copy producer and a compute consumer) and launch fusion. Operators never
check legality: the checker does, and the offline agent repairs what it can from the diagnostics.

Every random choice goes through the `random.Random` passed in, so a seed fixes the sequence.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from cake.agents.features import main_launch
from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.analysis import domain_values
from cake.ir.transforms import apply
from cake.ir.transforms.as_warpgroups import as_warpgroups
from cake.ir.transforms.bind_params import bind_params
from cake.ir.transforms.cluster_multicast import cluster_multicast
from cake.ir.transforms.commit_wgmma import commit_wgmma
from cake.ir.transforms.defer_merge import defer_merge
from cake.ir.transforms.fit_consumer_regs import consumer_budget, fit_consumer_regs
from cake.ir.transforms.free_copy_regs import free_copy_regs
from cake.ir.transforms.fuse_launches import fusable, fuse_launches
from cake.ir.transforms.hold_operand import hold_operand, holdable
from cake.ir.transforms.narrow_dtypes import K16_DTYPES, narrow_dtypes, operand_dtype_vars
from cake.ir.transforms.refit_forms import refit_forms
from cake.ir.transforms.sink_let import sink_let, sink_past_mma_naming, sinkable
from cake.ir.transforms.sites import has_feature, issues_mma, issues_wgmma, mma_sites, register_budgets
from cake.ir.visit import map_stmts, with_launch, with_role
from cake.ir.visit import walk_stmts as walk

from cake.arch import Feature


@dataclass(frozen=True, slots=True)
class Mutation:
    kernel: n.Kernel
    description: str  # operator name and what it changed, one line (stored with the candidate)


Operator = Callable[[n.Kernel, random.Random], Mutation | None]

WARP_COUNTS = (1, 2, 4, 8, 16)
STAGE_RANGE = (1, 7)  # half-open, for literal stage counts
NEIGHBOUR_PROBABILITY = 0.7  # a param move goes to an adjacent domain value this often
PORTABLE_FORMS = ("dot", "mma_sync.m16n8k16")  # offered everywhere; wgmma only where it can be legal
K16_FORMS = frozenset({"mma_sync.m16n8k16"})  # fixed forms whose k16 shape takes only 16-bit operands


def with_param_default(kernel: n.Kernel, name: str, value: int) -> n.Kernel:
    """`kernel` with param `name` defaulting to `value`; committed wgmma forms follow the tiles they cover
    (`refit_forms`), so a tile move does not leave an instruction that no longer divides its tile."""
    return apply(refit_forms, bind_params(kernel, {name: value}))


def _step(values: tuple[int, ...], current: int, rng: random.Random) -> int | None:
    others = [v for v in values if v != current]
    if not others:
        return None
    if current in values and rng.random() < NEIGHBOUR_PROBABILITY:
        i = values.index(current)
        neighbours = [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]
        return rng.choice(neighbours)
    return rng.choice(others)


# ----------------------------------------------------------------------------------------- parametric


def mutate_param(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    movable = [p for p in kernel.params if len(domain_values(kernel, p.name)) > 1]
    if not movable:
        return None
    param = rng.choice(movable)
    value = _step(domain_values(kernel, param.name), param.default, rng)
    if value is None:
        return None
    return Mutation(with_param_default(kernel, param.name, value), f"param {param.name} {param.default}->{value}")


def mutate_two_params(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Move two different params at once (a step a one-param hill climb cannot take)."""
    movable = [p for p in kernel.params if len(domain_values(kernel, p.name)) > 1]
    if len(movable) < 2:
        return mutate_param(kernel, rng)
    out, moves = kernel, []
    for param in rng.sample(movable, 2):
        value = _step(domain_values(kernel, param.name), param.default, rng)
        if value is not None:
            out = with_param_default(out, param.name, value)
            moves.append(f"{param.name} {param.default}->{value}")
    return Mutation(out, "params " + ", ".join(moves)) if moves else None


def value_beyond(values: tuple[int, ...], high: bool) -> int | None:
    """The next value past one end of a sorted domain, following its progression: x2 (or /2) where each value
    doubles the one before, the common step where the values are evenly spaced; None where they are neither, the
    domain has one value, or the value would be below 1."""
    if len(values) < 2:
        return None
    pairs = list(zip(values[:-1], values[1:], strict=True))
    if all(b == 2 * a for a, b in pairs):
        beyond = values[-1] * 2 if high else (values[0] // 2 if values[0] % 2 == 0 else 0)
    elif len({b - a for a, b in pairs}) == 1:
        step = values[1] - values[0]
        beyond = values[-1] + step if high else values[0] - step
    else:
        return None
    return beyond if beyond >= 1 else None


def values_beyond(param: n.Param) -> list[int]:
    """The values just past whichever ends of `param`'s domain its default sits at (none when it sits inside)."""
    domain = param.domain
    if isinstance(domain, n.ValueRange):
        if domain.stop - domain.start < 2:
            return []
        ends = ((domain.start, domain.start - 1), (domain.stop - 1, domain.stop))
        return [beyond for edge, beyond in ends if param.default == edge and beyond >= 1]
    values = tuple(sorted(set(domain.values)))
    ends = ((values[0], value_beyond(values, high=False)), (values[-1], value_beyond(values, high=True)))
    return [beyond for edge, beyond in ends if param.default == edge and beyond is not None]


def widened(domain: n.Domain, value: int) -> n.Domain:
    """`domain` with `value` (just past one of its ends) added."""
    if isinstance(domain, n.ValueSet):
        return replace(domain, values=tuple(sorted({*domain.values, value})))
    return replace(domain, start=min(domain.start, value), stop=max(domain.stop, value + 1))


def mutate_widen(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """A param whose default sits at an end of its domain steps past that end (the domain grows by that value):
    a schedule's author bounds the space, and a search pushed against the bound is told nothing beyond it. The
    checker judges the new value like any other (a resource error is repaired back down by the agent)."""
    edges = [(param, value) for param in kernel.params for value in values_beyond(param)]
    if not edges:
        return None
    param, value = edges[rng.randrange(len(edges))]
    grown = replace(kernel, params=tuple(replace(p, domain=widened(p.domain, value)) if p is param else p
                                         for p in kernel.params))
    return Mutation(with_param_default(grown, param.name, value),
                    f"widen {param.name} past its domain: {param.default}->{value}")


# ----------------------------------------------------------------------------------------- structural


def mutate_stages(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Change a pipeline's depth: through its param when it has one, else the literal; or pipeline a loop."""
    launch = main_launch(kernel)
    loops = [s for r in launch.roles for s in walk(r.body) if isinstance(s, n.For)]
    if not loops:
        return None
    loop = rng.choice(loops)
    if loop.pipeline is None:
        return _pipeline_loop(kernel, launch, loop)
    stages = loop.pipeline.stages
    if isinstance(stages, n.Name) and kernel.param(stages.id) is not None:
        param = kernel.param(stages.id)
        assert param is not None
        value = _step(domain_values(kernel, param.name), param.default, rng)
        if value is None:
            return None
        return Mutation(with_param_default(kernel, param.name, value), f"stages {param.name} {param.default}->{value}")
    if isinstance(stages, n.IntLit):
        value = _step(tuple(range(*STAGE_RANGE)), stages.value, rng)
        if value is None:
            return None
        target = loop

        def fn(stmt: n.Stmt) -> n.Stmt:
            if stmt is target and isinstance(stmt, n.For) and stmt.pipeline is not None:
                return replace(stmt, pipeline=replace(stmt.pipeline, stages=n.IntLit(value)))
            return stmt

        roles = tuple(replace(r, body=map_stmts(r.body, fn)) for r in launch.roles)
        return Mutation(with_launch(kernel, launch, replace(launch, roles=roles)), f"stages {stages.value}->{value}")
    return None


def _pipeline_loop(kernel: n.Kernel, launch: n.Launch, loop: n.For) -> Mutation | None:
    used = {p.name for p in kernel.params}
    stage_param = "STAGES" if "STAGES" not in used else None
    stages: n.Expr = n.Name("STAGES") if stage_param or kernel.param("STAGES") else n.IntLit(2)
    names = {s.var for r in launch.roles for s in walk(r.body) if isinstance(s, n.For)}
    var = next(v for v in ("s", "st", "stage", "s_") if v not in names)
    target = loop

    def fn(stmt: n.Stmt) -> n.Stmt:
        if stmt is target:
            return replace(stmt, pipeline=n.Pipeline(stages, var))  # type: ignore[arg-type]
        return stmt

    roles = tuple(replace(r, body=map_stmts(r.body, fn)) for r in launch.roles)
    new = with_launch(kernel, launch, replace(launch, roles=roles))
    if stage_param:
        new = replace(new, params=(*new.params, n.Param("STAGES", 2, n.ValueRange(1, 7))))
    return Mutation(new, f"pipeline loop {loop.var} over STAGES")


def mutate_copy_kind(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Change a copy's mechanism. A copy that completes on an mbarrier (`signals`, a TMA transaction) stays:
    the barrier's transaction bytes and its waiters are built around it."""
    launch = main_launch(kernel)
    copies = [s for r in launch.roles for s in walk(r.body) if isinstance(s, n.Copy) and s.signals is None]
    if not copies:
        return None
    target = rng.choice(copies)
    kind = rng.choice([k for k in n.CopyKind if k is not target.kind])

    def fn(stmt: n.Stmt) -> n.Stmt:
        return replace(stmt, kind=kind) if stmt is target else stmt  # type: ignore[type-var]

    roles = tuple(replace(r, body=map_stmts(r.body, fn)) for r in launch.roles)
    return Mutation(with_launch(kernel, launch, replace(launch, roles=roles)),
                    f"copy into {_dest_name(target)} via {target.kind.value}->{kind.value}")


def _dest_name(copy: n.Copy) -> str:
    base = copy.dest.base if isinstance(copy.dest, n.Index) else copy.dest
    return base.id if isinstance(base, n.Name) else "?"


def mutate_swizzle(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Change a shared buffer's swizzle. The operands of one wgmma move together and keep a swizzle (its
    shared-memory descriptors read both with one swizzle mode, and have none for unswizzled tiles)."""
    launch = main_launch(kernel)
    if not launch.smem:
        return None
    buf = rng.choice(launch.smem)
    group = wgmma_partners(launch, buf.name)
    choices = [s for s in n.Swizzle if s is not buf.swizzle and not (group and s is n.Swizzle.NONE)]
    swizzle = rng.choice(choices)
    names = group or {buf.name}
    smem = tuple(replace(b, swizzle=swizzle) if b.name in names else b for b in launch.smem)
    return Mutation(with_launch(kernel, launch, replace(launch, smem=smem)),
                    f"swizzle {', '.join(sorted(names))} {buf.swizzle.value}->{swizzle.value}")


def wgmma_partners(launch: n.Launch, name: str) -> set[str]:
    """The shared buffers read as operands by the wgmmas that read `name` (empty when none does)."""
    group: set[str] = set()
    for let in mma_sites(launch):
        mma = let.value
        assert isinstance(mma, n.Mma)
        if not mma.form.startswith("wgmma."):
            continue
        b = mma.b.operand if isinstance(mma.b, n.Transpose) else mma.b
        operands = {x for x in (analysis.ref_name(mma.a), analysis.ref_name(b)) if x is not None}
        if name in operands:
            group |= operands
    return group


def mutate_grid(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    launch = main_launch(kernel)
    kind = n.GridKind.TILES if launch.grid.kind is n.GridKind.PERSISTENT else n.GridKind.PERSISTENT
    new = replace(launch, grid=replace(launch.grid, kind=kind))
    return Mutation(with_launch(kernel, launch, new), f"grid {launch.grid.kind.value}->{kind.value}")


def mutate_regs(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    launch = main_launch(kernel)
    role = rng.choice(launch.roles)
    current = analysis.try_value(role.regs, analysis.default_env(kernel))
    if current is None and role.regs is not None:
        return None  # a budget written as an expression of dims is not ours to move
    # Where the other roles declare budgets (setmaxnreg), dropping this one's is illegal: keep it declared.
    others_declare = any(r.regs is not None for r in launch.roles if r is not role)
    if current is None:
        value = rng.choice(register_budgets(kernel))
    elif rng.random() < 0.15 and not others_declare:
        new_role = replace(role, regs=None)
        return Mutation(with_role(kernel, launch, role, new_role), f"regs {role.name} {current}->compiler's choice")
    else:
        budget = consumer_budget(kernel) if issues_mma(role) else None  # an mma role's ceiling under setmaxnreg
        choices = tuple(r for r in register_budgets(kernel) if budget is None or r <= budget)
        value = _step(choices, current, rng) or current
    param = kernel.param(role.regs.id) if isinstance(role.regs, n.Name) else None
    if param is not None:  # a budget param (the warp-specialization passes add them): move its default
        if value not in domain_values(kernel, param.name):
            return None
        out = with_param_default(kernel, param.name, value)
    else:
        out = with_role(kernel, launch, role, replace(role, regs=n.IntLit(value)))
    if not issues_mma(role):  # a copy role's budget moved: the mma roles take up (or give back) the difference
        out = apply(fit_consumer_regs, out)
    return Mutation(out, f"regs {role.name} {current}->{value}")


def mutate_units(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Change a role's warp count (a literal; a param-valued count moves through `mutate_param`)."""
    launch = main_launch(kernel)
    role = rng.choice(launch.roles)
    if isinstance(role.units, n.Name) and kernel.param(role.units.id) is not None:
        param = kernel.param(role.units.id)
        assert param is not None
        value = _step(domain_values(kernel, param.name), param.default, rng)
        if value is None:
            return None
        return Mutation(with_param_default(kernel, param.name, value),
                        f"{role.unit.value} {role.name} {param.name} {param.default}->{value}")
    if not isinstance(role.units, n.IntLit) or issues_wgmma(role):
        return None  # a wgmma role is one warpgroup per instance (more of them: replicas, `split_consumer`)
    choices = WARP_COUNTS if role.unit is n.UnitKind.WARPS else (1, 2)
    value = _step(choices, role.units.value, rng)
    if value is None:
        return None
    new_role = replace(role, units=n.IntLit(value))
    # More threads with the same budgets may overflow the register file: re-split it where budgets are declared.
    return Mutation(apply(fit_consumer_regs, with_role(kernel, launch, role, new_role)),
                    f"{role.unit.value} {role.name} {role.units.value}->{value}")


def mutate_pingpong(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Toggle ping-pong for a replicated role that issues mma."""
    launch = main_launch(kernel)
    if launch.pingpongs:
        pp = rng.choice(launch.pingpongs)
        new = replace(launch, pingpongs=tuple(p for p in launch.pingpongs if p is not pp))
        return Mutation(with_launch(kernel, launch, new), f"pingpong {pp.role} off")
    replicated = [r for r in launch.roles if r.replicas is not None]
    if not replicated:
        return None
    role = rng.choice(replicated)
    new = replace(launch, pingpongs=(n.Pingpong(role.name, "mma"),))
    return Mutation(with_launch(kernel, launch, new), f"pingpong {role.name} around mma")


def mutate_mma_form(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Commit an mma to another instruction form (`dot` leaves the choice to the backend). wgmma is offered
    where it can be legal: on a target that has it, with both operands in shared memory (`commit_wgmma`)."""
    launch = main_launch(kernel)
    sites = [s for r in launch.roles for s in walk(r.body)
             if isinstance(s, (n.Let, n.Assign)) and isinstance(s.value, n.Mma)]
    if not sites:
        return None
    target = rng.choice(sites)
    assert isinstance(target.value, n.Mma)
    old = target.value.form
    choices = [f for f in PORTABLE_FORMS if f != old]
    wgmma = None if old.startswith("wgmma") or not has_feature(kernel, Feature.WGMMA) or not isinstance(
        target, n.Let) else commit_wgmma(kernel, target.name)
    if wgmma is not None:
        choices.append("wgmma")
    form = rng.choice(choices)
    if form == "wgmma" and wgmma is not None:
        new_form = next(s.value.form for s in mma_sites(main_launch(wgmma)) if s.name == target.name)
        return Mutation(wgmma, f"mma {target.name} via {old}->{new_form}")

    def fn(stmt: n.Stmt) -> n.Stmt:
        if stmt is target and isinstance(stmt, (n.Let, n.Assign)) and isinstance(stmt.value, n.Mma):
            return replace(stmt, value=replace(stmt.value, form=form))
        return stmt

    roles = tuple(replace(r, body=map_stmts(r.body, fn)) for r in launch.roles)
    out = with_launch(kernel, launch, replace(launch, roles=roles))
    if form in K16_FORMS:
        role = next(r for r in launch.roles if any(s is target for s in walk(r.body)))
        names = operand_dtype_vars(launch, role, target.value)
        if names is None:
            return None  # an operand of a fixed 32-bit type: no k16 form takes it
        narrowed = narrow_dtypes(out, names)
        if narrowed is None and any(c not in K16_DTYPES for v in out.dtype_vars if v.name in names for c in v.choices):
            return None  # a dtype variable would keep no 16-bit type
        out = narrowed or out
    return Mutation(out, f"mma {target.name} via {old}->{form}")


def mutate_unit_kind(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Regroup a role's warps as warpgroups (4 warps each) or back: wgmma and setmaxnreg need warpgroups."""
    launch = main_launch(kernel)
    role = rng.choice(launch.roles)
    units = analysis.try_value(role.units, analysis.default_env(kernel))
    if units is None:
        return None
    if role.unit is n.UnitKind.WARPS:
        grouped = as_warpgroups(kernel, role.name, launch.name)
        return None if grouped is None else Mutation(grouped, f"{role.name} warps {units} -> warpgroups {units // 4}")
    else:
        if issues_wgmma(role) or any(r.regs is not None for r in launch.roles if r is not role):
            return None  # wgmma and setmaxnreg budgets are per warpgroup
        new_role = replace(role, unit=n.UnitKind.WARPS, units=n.IntLit(units * 4), regs=None)
        what = f"warpgroups {units} -> warps {units * 4}"
    return Mutation(with_role(kernel, launch, role, new_role), f"{role.name} {what}")


def mutate_fusion(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Fuse a launch into the persistent launch after it (`fuse_launches`, where E0412 allows it): one kernel a
    call instead of two, a grid-wide barrier where the launch boundary was. Generic: any adjacent pair qualifies."""
    sites = fusable(kernel)
    if not sites:
        return None
    name = sites[rng.randrange(len(sites))]
    out = fuse_launches(kernel, name)
    if out is None:
        return None
    fusion = out.fused_into(name)
    assert fusion is not None
    return Mutation(out, f"fuse {fusion.launch} into {fusion.into} (one launch a call, a grid-wide barrier between)")


def _at_a_named_site(kernel: n.Kernel, rng: random.Random, sites: Callable[[n.Kernel], tuple[str, ...]],
                     apply_at: Callable[[n.Kernel, str], n.Kernel | None], what: str) -> Mutation | None:
    """A pass applied at one of the lets it names (`sites`), drawn at random; `what` describes it (`{name}`)."""
    names = sites(kernel)
    if not names:
        return None
    name = rng.choice(names)
    out = apply_at(kernel, name)
    return None if out is None else Mutation(out, what.format(name=name))


def mutate_hold(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Read a loop-invariant mma A operand into registers once, before its loop (`hold_operand`), where the form
    may take A from registers: the products then read only B from shared memory. Generic: any such mma.

    The held tile is live beside the accumulator, which makes the product the point of highest register pressure:
    the consumers then take the registers the copy roles hold idle (`free_copy_regs`; the parent's split was chosen
    without the held tile in it), and every let that merely waits across the product moves past it
    (`sink_past_mma`). Without that move a child spills and, priced with its spills, is never timed, so the `sink`
    that would fix it never gets it as a parent: session 21's fastest evolved ping-pong, held, spilled 10 registers
    (ptxas) until its norms' load moved past the mma."""
    held = _at_a_named_site(kernel, rng, holdable, hold_operand, "hold mma {name}'s A operand in registers")
    if held is None:
        return None
    out, description = held.kernel, held.description
    freed = free_copy_regs(out)
    if freed is not None:
        out, description = freed, f"{description}; registers from the copy roles ({_budgets(freed)})"
    sunk, moved = sink_past_mma_naming(out)
    if moved:
        out, description = sunk, f"{description}; moved past the mma: {', '.join(moved)}"
    return Mutation(out, description)


def _budgets(kernel: n.Kernel) -> str:
    env = analysis.default_env(kernel)
    return ", ".join(f"{role.name} {analysis.try_value(role.regs, env)}" for role in main_launch(kernel).roles
                     if role.regs is not None)


def mutate_sink(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Move a let down its block toward its first use (`sink_let`): what is live across the statements it passes
    (an mma, in a consumer's k loop) changes, which ptxas's register allocation sees. Generic: any movable let."""
    return _at_a_named_site(kernel, rng, sinkable, sink_let, "sink let {name} toward its first use")


def mutate_cluster(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Cluster the CTAs along a launch's first grid axis and multicast the TMA tiles they all load alike
    (`cluster_multicast`): each CTA loads 1/CLUSTER of such a tile and L2 serves it once per cluster. Generic: any
    launch with a TMA copy whose source does not depend on that axis; the size is a param the search moves."""
    out = cluster_multicast(kernel)
    if out is None:
        return None
    launch = next(lc for lc in out.launches if lc.cluster is not None)
    assert launch.cluster is not None
    shared = sorted({analysis.ref_name(s.dest) or "?" for r in launch.roles for s in walk(r.body)
                     if isinstance(s, n.Copy) and s.multicast})
    return Mutation(out, f"cluster launch {launch.name} along {launch.cluster.axis}; multicast {', '.join(shared)}")


def mutate_defer(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """Merge each running row minimum (and its position) across the threads sharing a row once, after its loop,
    instead of every iteration (`defer_merge`): the same values, no shuffles in the loop. Generic: any running
    min/argmin or max/argmax a role carries through a loop."""
    out = defer_merge(kernel)
    if out is None:
        return None
    added = [f"{d.role} {', '.join(d.names)}" for lc in out.launches for d in lc.defers
             if d not in next(k for k in kernel.launches if k.name == lc.name).defers]
    return Mutation(out, f"defer the merge of {'; '.join(added)} past its loop")


STRUCTURAL: dict[str, Operator] = {
    "stages": mutate_stages,
    "copy": mutate_copy_kind,
    "swizzle": mutate_swizzle,
    "grid": mutate_grid,
    "regs": mutate_regs,
    "units": mutate_units,
    "pingpong": mutate_pingpong,
    "mma_form": mutate_mma_form,
    "unit_kind": mutate_unit_kind,
    "fuse": mutate_fusion,
    "hold": mutate_hold,
    "sink": mutate_sink,
    "cluster": mutate_cluster,
    "defer": mutate_defer,
}

# Operators whose every child holds a construct only some backends lower (E06xx), offered by the offline agent
# only when the run's backend is among them: a Triton run would spend its attempts on children E0606 refuses (no
# grid-wide barrier in Triton). Operators absent here are offered for every backend; those whose children a
# backend refuses only sometimes fade through the survival-rate weights instead.
BACKENDS: dict[str, frozenset[str]] = {
    "fuse": frozenset({"cuda"}),
    "hold": frozenset({"cuda"}),  # registers are an A memory of wgmma only; Triton takes no wgmma form (E0605)
    "cluster": frozenset({"cuda"}),  # Triton expresses no clusters (E0607)
    "defer": frozenset({"cuda"}),  # Triton places its own reductions (E0608)
}


def offered(operator: str, backend: str | None) -> bool:
    """Whether `operator` is worth drawing for a run lowered by `backend` (None: unknown, every operator is)."""
    return backend is None or backend in BACKENDS.get(operator, frozenset({backend}))


PARAMETRIC: dict[str, Operator] = {
    "param": mutate_param,
    "param2": mutate_two_params,
    "widen": mutate_widen,
}
