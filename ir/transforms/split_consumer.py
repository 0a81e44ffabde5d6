"""split_consumer: the one mma role of the main launch becomes `CONSUMERS` replicas, each owning one slice
of a CTA tile that many times as tall.

Precondition: exactly one role issues mma and it has no replicas; the launch has a grid. Effect:

* a new param `CONSUMERS` (fresh name) counts the replicas; its domain runs from 2 to the most replicas the
  block's thread limit (`cake.arch`) leaves room for beside the other roles, default 2 (the least that splits);
  the search moves it;
* the grid's first axis covers `CONSUMERS` times the rows per CTA: row tile `t` becomes tiles
  `t*CONSUMERS + w` for replica `w`;
* one-tile shared buffers and barriers the role uses become one per replica (`xs[w]`, `x_full[w]`); the other
  roles' statements that fill or wait on them become a loop over the replicas; staged barriers the role
  arrives on expect one arrival per replica;
* a replicated wgmma role ping-pongs around the mma (`pingpong consumer around mma`: one replica's epilogue
  overlaps the others' tensor-core work), and register budgets are re-fitted (`fit_consumer_regs`).

None when the precondition does not hold or the thread limit leaves no room for two replicas.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms import apply
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.sites import issues_mma, issues_wgmma, main_launch, target_spec
from cake.ir.visit import fresh, identifiers, mentions, substitute_body, with_launch
from cake.ir.visit import walk_stmts as walk

CONSUMERS = "CONSUMERS"
REPLICA_VAR = "w"
MIN_REPLICAS = 2  # fewer is no split


def max_replicas(kernel: n.Kernel, launch: n.Launch, role: n.Role) -> int | None:
    """How many instances of `role` fit in a block beside the launch's other roles (`cake.arch`'s thread limit)."""
    spec = target_spec(kernel)
    env = analysis.default_env(kernel)
    per = analysis.try_value_of(lambda e: analysis.role_threads_per_instance(role, e), env)
    others = [analysis.try_value_of(lambda e, r=r: analysis.role_replicas(r, e) * analysis.role_threads_per_instance(r, e),
                                    env) for r in launch.roles if r is not role]
    if spec is None or not per or any(o is None for o in others):
        return None
    return (spec.threads_per_block_max - sum(o for o in others if o is not None)) // per


def _times(expr: n.Expr, k: n.Expr) -> n.Expr:
    return k if expr == n.IntLit(1) else n.BinOp(n.BinOpKind.MUL, expr, k)


def split_consumer(kernel: n.Kernel) -> n.Kernel | None:
    launch = main_launch(kernel)
    mma_roles = [r for r in launch.roles if r.replicas is None and issues_mma(r)]
    if len(mma_roles) != 1 or not launch.grid.axes or any(r.replicas is not None for r in launch.roles):
        return None
    role = mma_roles[0]
    top = max_replicas(kernel, launch, role)
    if top is None or top < MIN_REPLICAS:
        return None
    count_name = fresh(CONSUMERS, set(identifiers(kernel)))
    count: n.Expr = n.Name(count_name)
    kernel = replace(kernel, params=(*kernel.params,
                                     n.Param(count_name, MIN_REPLICAS, n.ValueRange(MIN_REPLICAS, top + 1))))
    axis = launch.grid.axes[0]
    names = {s.var for r in launch.roles for s in walk(r.body) if isinstance(s, n.For)} | {axis.var}
    var = fresh(REPLICA_VAR, names | set(identifiers(kernel)))
    # Row tile t of the taller grid becomes tiles t*CONSUMERS + w.
    taller = n.BinOp(n.BinOpKind.ADD, n.BinOp(n.BinOpKind.MUL, n.Name(axis.var), count), n.Name(var))
    # One-tile buffers and barriers the role uses become one per replica.
    own = {b.name for b in launch.smem if b.stages is None and mentions(role.body, {b.name})}
    own |= {b.name for b in launch.barriers if b.count is None and mentions(role.body, {b.name})}
    per_replica: dict[str, n.Expr] = {name: n.Index(n.Name(name), (n.Name(var),)) for name in own}
    body = substitute_body(role.body, {axis.var: taller, **per_replica})
    consumer = replace(role, replicas=n.Replicas(var, count), body=body)
    grid = replace(launch.grid, axes=(replace(axis, extent=n.Call("cdiv", (axis.extent, count))),
                                      *launch.grid.axes[1:]))
    arrived = {analysis.ref_name(s.barrier) for s in walk(role.body) if isinstance(s, n.Arrive)}
    barriers = tuple(replace(b, count=count) if b.name in own else
                     replace(b, arrivals=_times(b.arrivals, count)) if b.name in arrived else b
                     for b in launch.barriers)
    smem = tuple(replace(b, stages=count) if b.name in own else b for b in launch.smem)
    roles = tuple(consumer if r is role else _fill_per_replica(r, own, var, count, axis.var, taller)
                  for r in launch.roles)
    pingpongs = launch.pingpongs
    if issues_wgmma(consumer) and not pingpongs:
        pingpongs = (n.Pingpong(consumer.name, "mma"),)
    new = replace(launch, grid=grid, smem=smem, barriers=barriers, roles=roles, pingpongs=pingpongs)
    return apply(fit_consumer_regs, with_launch(kernel, launch, new))


def _fill_per_replica(role: n.Role, own: set[str], var: str, count: n.Expr, axis_var: str,
                      taller: n.Expr) -> n.Role:
    """A producer's statements that fill one-tile buffers (or wait on their barriers) become a loop over the
    replicas, each filling its own buffer with its own slice of the taller tile."""
    if not own:
        return role
    out: list[n.Stmt] = []
    group: list[n.Stmt] = []

    def flush() -> None:
        if group:
            mapping = {axis_var: taller, **{name: n.Index(n.Name(name), (n.Name(var),)) for name in own}}
            out.append(n.For(var, n.IntLit(0), count, substitute_body(tuple(group), mapping)))
            group.clear()

    for stmt in role.body:
        if not isinstance(stmt, n.For) and mentions(stmt, own):
            group.append(stmt)
        else:
            flush()
            out.append(stmt)
    flush()
    return replace(role, body=tuple(out))
