"""E03xx — resource budgets per launch, against the target's limits in `cake.arch`.

Budgets are evaluated at the params' defaults (the schedule's chosen point; other domain points are the
search space) under every dtype the schedule serves, and the worst case is reported. A budget that
depends on an unbound dim cannot be proven: it is reported as a note naming the dim to bind.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TypeVar

from cake.ir import analysis as an
from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import PINGPONG, PLAIN, TCGEN05, derive
from cake.ir.checks.registry import Finding, finding
from cake.ir.checks.registry import check as register_check
from cake.ir.nodes import Assign, DType, Launch, Let, Mma, Name, NamedBarrierSync, Role, TileType
from cake.ir.stage_reads import held_operands

from cake.arch import THREADS_PER_WARP, WARPS_PER_WARPGROUP, WGMMA_ISSUE_REGISTERS, ArchSpec, MmaFamily
from cake.diagnostics import Severity

R = TypeVar("R")


def _worst(ctx: CheckContext, launch: Launch, what: str, compute: Callable[[an.Env], R],
           key: Callable[[R], int]) -> Iterator[tuple[R, an.Env] | Finding]:
    """The result with the largest `key` over the dtype bindings, or one note if it cannot be evaluated."""
    best: tuple[R, an.Env] | None = None
    for env in ctx.budget_envs:
        try:
            result = compute(env)
        except an.Unbound as unbound:
            names = ", ".join(f"`{name}`" for name in unbound.names)
            yield finding(launch, f"launch `{launch.name}`", f"depends on {names}", severity=Severity.NOTE,
                          message=f"{what} of launch `{launch.name}` not proven: it depends on {names}",
                          help=f"bind it to prove the budget: `cake check --dim {unbound.names[0]}=SIZE`")
            return
        if best is None or key(result) > key(best[0]):
            best = (result, env)
    if best is not None:
        yield best


def _budget(launch: Launch, arch: ArchSpec, env: an.Env) -> tuple[an.RoleRegisters, ...]:
    return an.register_budget(launch, env, arch)


def _dtype_note(env: an.Env) -> tuple[str, ...]:
    return (f"with {', '.join(f'{k} = {v.value}' for k, v in env.dtypes.items())}",) if env.dtypes else ()


@register_check("E0301", "shared memory over budget",
                "shared memory over budget in launch `{launch}`: {bytes} bytes > {limit} bytes on {arch}",
                examples=[derive(PINGPONG, ("param STAGES = 4 in 2 .. 5", "param STAGES = 6 in 2 .. 7"))])
def smem_budget(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    limit = ctx.arch.smem_per_block_max_bytes
    for launch in ctx.kernel.launches:
        for item in _worst(ctx, launch, "shared memory", partial(an.smem_layout, launch),
                           lambda layout: layout.total_bytes):
            if isinstance(item, Finding):
                if launch.smem:
                    yield item
                continue
            layout, env = item
            if layout.total_bytes <= limit:
                continue
            biggest = max(layout.buffers, key=lambda b: b.bytes, default=None)
            decl: object = (next(s for s in launch.smem if s.name == biggest.name) if biggest is not None
                            else launch.barriers[0] if launch.barriers else launch)
            name = biggest.name if biggest is not None else "mbarriers"
            parts = [f"{b.name}: {b.stages} x {b.stage_bytes:,}" for b in layout.buffers]
            parts.append(f"{layout.barrier_count} mbarriers: {layout.barrier_count * an.MBARRIER_BYTES}")
            size = biggest.bytes if biggest is not None else layout.total_bytes
            yield finding(decl, f"shared buffer `{name}`",
                          f"{layout.total_bytes:,} bytes > {limit:,} bytes limit on {ctx.arch.name}",
                          help=f"lower the stage count or tile size of `{name}` ({size:,} bytes)",
                          notes=("buffers: " + "; ".join(parts), *_dtype_note(env)),
                          launch=launch.name, bytes=f"{layout.total_bytes:,}", limit=f"{limit:,}",
                          arch=ctx.arch.name)


@register_check("E0302", "register file over budget",
                "register file over budget in launch `{launch}`: {total} registers > {limit} {pool}",
                examples=[derive(PINGPONG, ("warpgroups 1, regs 232", "warpgroups 1, regs 240")),
                          derive(PINGPONG, ("warpgroups 1, regs 40", "warpgroups 1, regs 48"))])
def register_file(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    arch = ctx.arch
    for launch in ctx.kernel.launches:
        if not any(r.regs is not None for r in launch.roles):
            continue  # the compiler chooses; ptxas reports it after lowering
        for item in _worst(ctx, launch, "the register budget",
                           partial(_budget, launch, arch),
                           lambda roles: sum(r.total for r in roles)):
            if isinstance(item, Finding):
                yield item
                continue
            roles, env = item
            total = sum(r.total for r in roles)
            pool = an.register_pool(launch, env, arch)
            if total <= pool.registers:
                continue
            worst = max(roles, key=lambda r: r.total)
            role = next(r for r in launch.roles if r.name == worst.role)
            parts = [f"{r.role}: {r.instances} x {r.threads_per_instance} threads x {r.regs_per_thread}"
                     + ("" if r.declared else " (default share)") for r in roles]
            yield finding(role.regs if role.regs is not None else role, f"role `{role.name}`",
                          f"{total:,} registers > {pool.registers:,} {pool.what}",
                          help=f"lower `regs` of role `{role.name}` ({worst.total:,} registers in all)",
                          notes=("per role: " + "; ".join(parts),),
                          launch=launch.name, total=f"{total:,}", limit=f"{pool.registers:,}", pool=pool.what)


@register_check("E0303", "invalid register budget",
                "invalid register budget for role `{role}`: {regs} registers per thread ({why})",
                examples=[derive(PINGPONG, ("warpgroups 1, regs 40", "warpgroups 1, regs 36"))])
def register_value(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    arch = ctx.arch
    for launch in ctx.kernel.launches:
        specialized = an.is_warp_specialized(launch)
        for role in launch.roles:
            if role.regs is None:
                continue
            regs = an.try_value(role.regs, ctx.env)
            if regs is None:
                continue
            why = ""
            if regs > arch.registers_per_thread_max or regs <= 0:
                why = f"the limit is {arch.registers_per_thread_max}"
            elif specialized and regs % arch.register_allocation_granularity:
                why = f"setmaxnreg takes multiples of {arch.register_allocation_granularity}"
            elif specialized and arch.setmaxnreg_values and regs < arch.setmaxnreg_min_registers:
                why = f"setmaxnreg takes at least {arch.setmaxnreg_min_registers}"
            if why:
                g = arch.register_allocation_granularity
                fix = min(arch.registers_per_thread_max // g * g, max(g, regs // g * g))
                if specialized and arch.setmaxnreg_values:
                    fix = max(fix, arch.setmaxnreg_min_registers)
                yield finding(role.regs, f"role `{role.name}`", f"{regs} registers: {why}",
                              help=f"use `regs {fix}`", role=role.name, regs=regs, why=why)


# A 32-bit register holds 4 bytes of a tile; an mma accumulator is spread evenly over the threads that
# issue the instruction (a warpgroup for wgmma, the role instance's warps otherwise).
REGISTER_BYTES = 4
WARPGROUP_THREADS = THREADS_PER_WARP * WARPS_PER_WARPGROUP


@register_check("E0307", "mma accumulator exceeds the role's registers",
                "the accumulator `{tile}`{held} needs {need} registers per thread, more than the {regs} of role "
                "`{role}`",
                examples=[derive(PINGPONG, ("param BN = 128 in {64, 128}", "param BN = 256 in {64, 128, 256}"),
                                 ("param STAGES = 4 in 2 .. 5", "param STAGES = 3 in 2 .. 5")),
                          # 128 accumulators + 64 of the held point tile > 176
                          derive(PINGPONG, ("  let best: f32[BN] = inf\n",
                                            "  let xa: T[BN, 128] = xs[w]\n  let best: f32[BN] = inf\n"),
                                 ("mma(xs[w], cs[s].T)", "mma(xa, cs[s].T)"),
                                 ("warpgroups 1, regs 232", "warpgroups 1, regs 176"))])
def accumulator_registers(ctx: CheckContext) -> Iterable[Finding]:
    """An mma result held in registers that alone needs more registers per thread than its role has
    (its `regs`, or the launch's even share) must spill: ptxas serializes the wgmma and moves the
    accumulator through local memory. A wgmma A operand the role holds in registers (`cake.ir.stage_reads`) is live
    across the same products and counts with it. Certain, so an error — no other live value is counted."""
    assert ctx.arch is not None
    for launch in ctx.kernel.launches:
        for env in ctx.budget_envs:
            try:
                budgets = {r.role: r for r in an.register_budget(launch, env, ctx.arch)}
            except an.Unbound:
                break
            found = next(_accumulator_overflows(launch, env, budgets), None)
            if found is not None:
                yield found
                break


def _mma_results(role: Role) -> Iterator[tuple[Let | Assign, str, TileType]]:
    """Each statement that binds an mma result to a typed register tile: `let d: f32[..] = mma(..)`, and an
    accumulation into a declared tile (`acc = acc + mma(..)`)."""
    types: dict[str, TileType] = {}
    for site in an.walk_body(role.body):
        stmt = site.stmt
        if isinstance(stmt, Let) and stmt.type is not None:
            types[stmt.name] = stmt.type
        if isinstance(stmt, (Let, Assign)) and any(isinstance(e, Mma) for e in an.walk_expr(stmt.value)):
            tile = types.get(stmt.name)
            if tile is not None:
                yield stmt, stmt.name, tile


def _registers_of(tile: TileType, env: an.Env, threads: int) -> int:
    """Registers per thread a tile spread over `threads` takes (raises an.Unbound)."""
    elements = math.prod(an.value(extent, env) for extent in tile.shape)
    return -(-elements * an.elem_bytes(tile.elem, env) // (REGISTER_BYTES * threads))


def _accumulator_overflows(launch: Launch, env: an.Env,
                           budgets: dict[str, an.RoleRegisters]) -> Iterator[Finding]:
    held_names = held_operands(launch)
    for role in launch.roles:
        budget = budgets[role.name]
        threads = budget.threads_per_instance
        held = [site.stmt for site in an.walk_body(role.body)
                if isinstance(site.stmt, Let) and site.stmt.name in held_names and site.stmt.type is not None]
        try:
            held_need = sum(_registers_of(s.type, env, threads) for s in held if s.type is not None)
        except an.Unbound:
            held_need = 0
        held_text = (" with the held operand" + ("s " if len(held) > 1 else " ") + ", ".join(f"`{s.name}`" for s in held)
                     if held_need else "")
        for stmt, name, tile in _mma_results(role):
            try:
                need = _registers_of(tile, env, threads) + held_need
                elements = math.prod(an.value(extent, env) for extent in tile.shape)
                size = an.elem_bytes(tile.elem, env)
            except an.Unbound:
                continue
            if need <= budget.regs_per_thread:
                continue
            share = "" if budget.declared else " (the launch's even share; no `regs` given)"
            yield finding(stmt, f"mma result `{name}`",
                          f"{need} registers per thread > {budget.regs_per_thread}{share}",
                          help=f"shrink the tile of `{name}` (fewer rows or columns per role instance), or "
                               f"spread it over more threads; ptxas would spill it to local memory",
                          notes=(f"{elements:,} elements x {size} B over {threads} threads"
                                 + (f", plus {held_need} registers a thread of held operands" if held_need else ""),
                                 *_dtype_note(env)),
                          tile=name, held=held_text, need=need, regs=budget.regs_per_thread, role=role.name)


@register_check("E0308", "an mma instruction exceeds the registers its launch compiles with",
                "`{form}` needs {need} registers per thread to issue ({fragment} of its accumulator + {issue}), more "
                "than the {cap} that launch `{launch}` compiles with ({threads} threads)",
                examples=[derive(PINGPONG, ("param BN = 128 in {64, 128}", "param BN = 64 in {64, 128}"),
                                 ("role consumer[w in 2]: warpgroups 1, regs 232",
                                  "role consumer[w in 5]: warpgroups 1, regs 88"),
                                 ("smem xs[2]", "smem xs[5]"), ("mbarrier x_full[2]", "mbarrier x_full[5]"),
                                 ("mbarrier x_empty[2]", "mbarrier x_empty[5]"), ("arrivals 2 free", "arrivals 5 free"),
                                 ("for w in 0 .. 2", "for w in 0 .. 5"), ("tile*2*BN + w*BN : +BN, :]",
                                                                           "tile*5*BN + w*BN : +BN, :]"),
                                 ("ids[b, tile*2*BN", "ids[b, tile*5*BN"), ("cdiv(N, 2*BN)", "cdiv(N, 5*BN)"))])
def mma_issue_registers(ctx: CheckContext) -> Iterable[Finding]:
    """ptxas compiles a launch under `__launch_bounds__(threads, 1)`: no thread may use more than the even share of
    the register file (`an.default_regs_per_thread`), whatever budget setmaxnreg gives its role later. One wgmma
    holds its whole accumulator fragment and its descriptors at once (`cake.arch.WGMMA_ISSUE_REGISTERS`), and ptxas
    cannot spill inside it: over the share it refuses the kernel (C7602). Session 28's H200 seed 15 timed four such
    children (6 or 7 consumer warpgroups, a 64-register fragment, a cap of 64 or 72): each died at its first call.
    Unlike E0307 (the role's budget, which ptxas meets by spilling), this is the whole launch's thread count."""
    assert ctx.arch is not None
    arch = ctx.arch
    for launch in ctx.kernel.launches:
        for env in ctx.budget_envs:
            try:
                threads = (an.setmaxnreg_threads(launch, env) if an.reallocates_registers(launch, arch)
                           else an.launch_threads(launch, env))
            except an.Unbound:
                break
            found = next(_issue_overflows(launch, threads, an.default_regs_per_thread(threads, arch), arch), None)
            if found is not None:
                yield found
                break


def _issue_overflows(launch: Launch, threads: int, cap: int, arch: ArchSpec) -> Iterator[Finding]:
    """Each wgmma of `launch` whose accumulator fragment (spread over the warpgroup that issues it) plus the issue
    registers is over `cap`, the registers a thread of a `threads`-thread launch compiles with."""
    for role in launch.roles:
        for site in an.walk_body(role.body):
            for expr in (an.walk_expr(site.stmt.value) if isinstance(site.stmt, (Let, Assign)) else ()):
                form = arch.mma_form(expr.form) if isinstance(expr, Mma) else None
                if form is None or form.family is not MmaFamily.WGMMA:
                    continue
                accumulator_bytes = DType(form.accumulator_dtype).bytes
                fragment = -(-form.m * form.n * accumulator_bytes // (REGISTER_BYTES * WARPGROUP_THREADS))
                need = fragment + WGMMA_ISSUE_REGISTERS
                if need <= cap:
                    continue
                counts = sorted({r.replicas.count.id for r in launch.roles
                                 if r.replicas is not None and isinstance(r.replicas.count, Name)})
                fewer = f"fewer instances of {', '.join(f'`{c}`' for c in counts)}" if counts else "fewer warps"
                yield finding(expr, f"`{form.name}`", f"{need} registers per thread > {cap} at {threads} threads",
                              help=f"launch fewer threads ({fewer}: {arch.registers_per_sm:,} registers / threads "
                                   f"must reach {need}), or a narrower form (smaller N)",
                              form=form.name, need=need, fragment=fragment, issue=WGMMA_ISSUE_REGISTERS, cap=cap,
                              launch=launch.name, threads=threads)


@register_check("E0304", "too many threads per block",
                "too many threads in launch `{launch}`: {threads} > {limit}",
                examples=[derive(PLAIN, ("role main: warps 4", "role main: warps 40"))])
def threads_per_block(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    limit = ctx.arch.threads_per_block_max
    for launch in ctx.kernel.launches:
        threads = an.try_value_of(lambda env, la=launch: an.launch_threads(la, env), ctx.env)
        if threads is not None and threads > limit:
            role = max(launch.roles, key=lambda r: an.try_value_of(
                lambda env, r=r: an.role_replicas(r, env) * an.role_threads_per_instance(r, env), ctx.env) or 0)
            yield finding(role, f"role `{role.name}`", f"{threads} threads > {limit} per block",
                          help=f"use fewer warps in role `{role.name}`",
                          launch=launch.name, threads=threads, limit=limit)


@register_check("E0305", "tensor memory over budget",
                "tensor memory over budget in launch `{launch}`: {columns} > {limit} on {arch}",
                examples=[derive(TCGEN05, ("tmem acc_t: f32[BM, BN]", "tmem acc_t[5]: f32[BM, BN]"),
                                 ("-> acc_t via", "-> acc_t[0] via"), ("load acc_t\n", "load acc_t[0]\n"))])
def tmem_budget(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    arch = ctx.arch
    if arch.tmem_columns == 0:
        return  # E0509 reports tensor memory on a target without it
    for launch in ctx.kernel.launches:
        if not launch.tmem:
            continue
        for item in _worst(ctx, launch, "tensor memory", partial(an.tmem_usage, launch),
                           lambda usage: usage.columns_allocated):
            if isinstance(item, Finding):
                yield item
                continue
            usage, _env = item
            decl = launch.tmem[-1]
            if usage.columns_allocated > arch.tmem_columns:
                yield finding(decl, f"tensor memory `{decl.name}`",
                              f"{usage.columns_used} columns (allocated {usage.columns_allocated}) > "
                              f"{arch.tmem_columns}",
                              help="use fewer accumulator stages or a narrower N tile",
                              launch=launch.name, columns=f"{usage.columns_allocated} columns",
                              limit=f"{arch.tmem_columns} columns", arch=arch.name)
            if usage.lanes_max > an.TMEM_LANES:
                yield finding(decl, f"tensor memory `{decl.name}`",
                              f"{usage.lanes_max} rows > {an.TMEM_LANES} lanes",
                              help="split the accumulator's rows over two tiles",
                              launch=launch.name, columns=f"{usage.lanes_max} lanes",
                              limit=f"{an.TMEM_LANES} lanes", arch=arch.name)


@register_check("E0306", "too many named barriers",
                "too many named barriers in launch `{launch}`: {count} > {limit}",
                examples=[derive(PINGPONG, ("  arrive x_empty[w]\n", "  arrive x_empty[w]\n  bar_sync 16 threads 256\n"))])
def named_barriers(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    limit = ctx.arch.named_barriers_per_block
    for launch in ctx.kernel.launches:
        ids: set[int] = {0}  # barrier 0 is __syncthreads
        for role in launch.roles:
            for site in an.walk_body(role.body):
                if isinstance(site.stmt, NamedBarrierSync):
                    bid = an.try_value(site.stmt.barrier_id, ctx.env)
                    if bid is not None and not 0 <= bid < limit:
                        yield finding(site.stmt.barrier_id, f"named barrier {bid}",
                                      f"id {bid}: ids run 0..{limit - 1}", help="use a smaller barrier id",
                                      launch=launch.name, count=f"id {bid}", limit=f"id {limit - 1}")
                    if bid is not None:
                        ids.add(bid)
        derived = 0
        for pp in launch.pingpongs:
            role = launch.role(pp.role)
            derived += an.try_value_of(lambda env, r=role: an.role_replicas(r, env), ctx.env) or 0 if role else 0
        count = len(ids) + derived
        if count > limit:
            yield finding(launch, f"launch `{launch.name}`", f"{count} named barriers > {limit}",
                          notes=(f"{len(ids)} explicit (with barrier 0) + {derived} derived for pingpong",),
                          launch=launch.name, count=count, limit=limit)
