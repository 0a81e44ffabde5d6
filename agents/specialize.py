"""Structural operators that change a schedule's warp roles: the moves from the plain fused kernel toward
DESIGN.md's ping-pong schedule.

* `specialize`: split a single compute role into a copy **producer** and a compute **consumer**. The
  global tile loads of the role become TMA copies into shared buffers that the consumer reads in place:
  loads inside the pipelined loop into `STAGES` staged buffers guarded by `full`/`empty` mbarriers (the
  producer waits `empty[s]`, copies with `signals full[s]`; the consumer waits `full[s]` and releases the
  stage with `arrive` after its last read), loads before the loop (the point tile) into a one-tile buffer
  with its own `<name>_full` / `<name>_empty` pair (so a persistent grid may refill it). On a target with
  `setmaxnreg` the producer is one warpgroup with a small register budget and the consumer is regrouped into
  warpgroups; on a target with wgmma an mma whose operands now live in shared memory is committed to
  `wgmma.m64nNk16` (N = the mma's column tile; the operands' dtype variables lose f32, which wgmma k16
  does not take).
* `split_consumer`: give the compute role two replicas, each owning half of a doubled point tile (the
  grid's first axis covers twice the rows per CTA). One-tile buffers and their barriers become one per
  replica (`xs[w]`, `x_full[w]`), and the producer fills both; barriers shared by the replicas expect one
  arrival per replica. A wgmma consumer pair is made to ping-pong around the mma (one replica's argmin
  overlaps the other's tensor-core work), and register budgets are re-split for the new thread count.

Each returns None when its precondition does not hold; legality (TMA boxes, arch features, backend
capability) is the checker's call.
"""

from __future__ import annotations

import random
from dataclasses import replace

from cake.agents.features import main_launch
from cake.agents.hopper import (
    commit_wgmma,
    deepen_pipelines,
    fit_consumer_regs,
    has_feature,
    issues_mma,
    issues_wgmma,
)
from cake.agents.mutations import Mutation, Operator
from cake.agents.precompute import precompute
from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms import apply
from cake.ir.transforms.as_warpgroups import regrouped
from cake.ir.transforms.drop_unused_params import drop_unused_params
from cake.ir.visit import fresh, mentions, substitute_body, with_launch
from cake.ir.visit import walk_stmts as walk

from cake.arch import Feature

PRODUCER = "producer"
PRODUCER_REGS = 40  # a copy-only warpgroup needs few registers; setmaxnreg hands the rest to consumers
REPLICA_VAR = "w"
REPLICAS = 2


def _elem_bytes(elem: n.ElemType) -> n.Expr:
    return n.IntLit(elem.bytes) if isinstance(elem, n.DType) else n.SizeOf(elem)


def _product(exprs: tuple[n.Expr, ...]) -> n.Expr:
    out = exprs[0]
    for e in exprs[1:]:
        out = n.BinOp(n.BinOpKind.MUL, out, e)
    return out


def _tma_load(kernel: n.Kernel, stmt: n.Stmt) -> n.Let | None:
    """`stmt` when it is a typed load of a global tile that a TMA copy can replace (out-of-range reads 0)."""
    if not (isinstance(stmt, n.Let) and stmt.type is not None and isinstance(stmt.value, n.Load)
            and isinstance(stmt.value.source, n.Index) and isinstance(stmt.value.source.base, n.Name)):
        return None
    source = stmt.value.source.base.id
    if kernel.tensor(source) is None and source not in {s.name for s in kernel.scratch}:
        return None  # a shared tile or a register value: not a TMA source
    other = stmt.value.other
    if other is not None and not (isinstance(other, (n.IntLit, n.FloatLit)) and other.value == 0):
        return None  # TMA fills out-of-range elements with zero, nothing else
    return stmt


def _after_last_use(body: tuple[n.Stmt, ...], names: set[str], stmt: n.Stmt) -> tuple[n.Stmt, ...]:
    """`body` with `stmt` inserted right after the last statement that reads one of `names`."""
    last = max((i for i, s in enumerate(body) if mentions(s, names)), default=len(body) - 1)
    return (*body[:last + 1], stmt, *body[last + 1:])


def specialize(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    launch = main_launch(kernel)
    if len(launch.roles) != 1 or launch.roles[0].replicas is not None:
        return None
    role = launch.roles[0]
    loop_at = next((i for i, s in enumerate(role.body) if isinstance(s, n.For) and s.pipeline is not None), None)
    if loop_at is None:
        return None
    loop = role.body[loop_at]
    assert isinstance(loop, n.For) and loop.pipeline is not None
    stage, stages = loop.pipeline.stage_var, loop.pipeline.stages
    staged = [s for s in map(lambda s: _tma_load(kernel, s), loop.body) if s is not None]
    tiles = [s for s in map(lambda s: _tma_load(kernel, s), role.body[:loop_at]) if s is not None]
    if not staged:
        return None
    taken = {b.name for b in launch.smem} | {b.name for b in launch.barriers}
    full, empty = fresh("full", taken), fresh("empty", taken)
    taken |= {full, empty}
    smem: list[n.SmemDecl] = []
    barriers: list[n.MbarrierDecl] = []
    producer_body: list[n.Stmt] = []
    rename: dict[str, n.Expr] = {}
    # The point tile(s): one buffer each, filled once per CTA tile, released after the consumer's last read.
    consumer_body: list[n.Stmt] = []
    releases: list[tuple[set[str], n.Stmt]] = []
    for stmt in role.body[:loop_at]:
        let = stmt if stmt in tiles else None
        if let is None:
            consumer_body.append(stmt)
            continue
        assert isinstance(let, n.Let) and let.type is not None and isinstance(let.value, n.Load)
        buf, t_full, t_empty = (fresh(f"{let.name}{suffix}", taken) for suffix in ("_s", "_full", "_empty"))
        taken |= {buf, t_full, t_empty}
        smem.append(n.SmemDecl(buf, None, let.type, _swizzle(let.type)))
        barriers += [n.MbarrierDecl(t_full, None, n.IntLit(1), _tile_bytes(let.type)),
                     n.MbarrierDecl(t_empty, None, n.IntLit(1), None, initially_free=True)]
        assert isinstance(let.value.source, n.Index)
        producer_body += [n.Wait(n.Name(t_empty)),
                          n.Copy(let.value.source, n.Name(buf), n.CopyKind.TMA, masked=let.value.masked,
                                 signals=n.Name(t_full))]
        consumer_body.append(n.Wait(n.Name(t_full)))
        if _in_registers(let.type):
            consumer_body.append(replace(let, value=n.Name(buf)))
        else:
            rename[let.name] = n.Name(buf)
        releases.append(({buf}, n.Arrive(n.Name(t_empty))))
    # The pipelined operand(s): STAGES buffers behind one full/empty pair.
    copies: list[n.Stmt] = [n.Wait(n.Index(n.Name(empty), (n.Name(stage),)))]
    tx: list[n.Expr] = []
    staged_bufs: set[str] = set()
    kept: dict[int, n.Stmt] = {}  # staged vectors keep a register copy
    for let in staged:
        assert let.type is not None and isinstance(let.value, n.Load) and isinstance(let.value.source, n.Index)
        buf = fresh(f"{let.name}_s", taken)
        taken.add(buf)
        staged_bufs.add(buf)
        smem.append(n.SmemDecl(buf, stages, let.type, _swizzle(let.type)))
        copies.append(n.Copy(let.value.source, n.Index(n.Name(buf), (n.Name(stage),)), n.CopyKind.TMA,
                             masked=let.value.masked, signals=n.Index(n.Name(full), (n.Name(stage),))))
        tx.append(_tile_bytes(let.type))
        if _in_registers(let.type):
            kept[id(let)] = replace(let, value=n.Index(n.Name(buf), (n.Name(stage),)))
        else:
            rename[let.name] = n.Index(n.Name(buf), (n.Name(stage),))
    tx_sum = tx[0]
    for t in tx[1:]:
        tx_sum = n.BinOp(n.BinOpKind.ADD, tx_sum, t)
    barriers += [n.MbarrierDecl(full, stages, n.IntLit(1), tx_sum),
                 n.MbarrierDecl(empty, stages, n.IntLit(1), None, initially_free=True)]
    loop_body = substitute_body(tuple(kept.get(id(s), s) for s in loop.body if s not in staged or id(s) in kept),
                                rename)
    loop_body = _after_last_use((n.Wait(n.Index(n.Name(full), (n.Name(stage),))), *loop_body), staged_bufs,
                                n.Arrive(n.Index(n.Name(empty), (n.Name(stage),))))
    rest = (*consumer_body, replace(loop, body=loop_body), *role.body[loop_at + 1:])
    body = substitute_body(rest, {k: v for k, v in rename.items() if k not in {s.name for s in staged}})
    # (the loop's own renames were applied above; outside it the staged names are out of scope)
    for names, release in releases:
        body = _after_last_use(body, names, release)
    producer_body.append(replace(loop, body=tuple(copies)))
    hopper = has_feature(kernel, Feature.SETMAXNREG)
    consumer = replace(role, name="consumer" if role.name != "consumer" else role.name, body=body)
    if hopper:
        consumer = regrouped(consumer, analysis.default_env(kernel)) or consumer
        producer = n.Role(PRODUCER, None, n.UnitKind.WARPGROUPS, n.IntLit(1), n.IntLit(PRODUCER_REGS),
                          tuple(producer_body))
    else:
        producer = n.Role(PRODUCER, None, role.unit, n.IntLit(1), None, tuple(producer_body))
    new = replace(launch, smem=(*launch.smem, *smem), barriers=(*launch.barriers, *barriers),
                  roles=(producer, consumer))
    out = deepen_pipelines(apply(drop_unused_params, with_launch(kernel, launch, new)))
    what = ""
    if has_feature(kernel, Feature.WGMMA):
        committed = commit_wgmma(out)
        if committed is not None:
            out, what = committed, ", mma via wgmma"
    if hopper:
        out = fit_consumer_regs(out)
    fed = ", ".join(s.name for s in (*tiles, *staged))
    return Mutation(out, f"TMA producer feeds {fed} to {consumer.name}{what}")


def _in_registers(tile: n.TileType) -> bool:
    """Whether the consumer keeps a register copy of a tile it receives in shared memory: vectors (a row of
    norms) yes, one read per stage; matrix tiles are read in place (mma operands, reductions)."""
    return len(tile.shape) < 2


def _swizzle(tile: n.TileType) -> n.Swizzle:
    """128-byte swizzle for matrix tiles (what wgmma descriptors and conflict-free reads want); none for vectors."""
    return n.Swizzle.B128 if len(tile.shape) >= 2 else n.Swizzle.NONE


def _tile_bytes(tile: n.TileType) -> n.Expr:
    return n.BinOp(n.BinOpKind.MUL, _product(tile.shape), _elem_bytes(tile.elem))


def split_consumer(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    launch = main_launch(kernel)
    mma_roles = [r for r in launch.roles if r.replicas is None and issues_mma(r)]
    if len(mma_roles) != 1 or not launch.grid.axes:
        return None
    role = mma_roles[0]
    axis = launch.grid.axes[0]
    names = {s.var for r in launch.roles for s in walk(r.body) if isinstance(s, n.For)} | {axis.var}
    var = fresh(REPLICA_VAR, names)
    # Row tile t of the doubled grid becomes tiles 2t + w.
    doubled = n.BinOp(n.BinOpKind.ADD, n.BinOp(n.BinOpKind.MUL, n.Name(axis.var), n.IntLit(REPLICAS)), n.Name(var))
    # One-tile buffers and barriers the role uses become one per replica.
    own = {b.name for b in launch.smem if b.stages is None and mentions(role.body, {b.name})}
    own |= {b.name for b in launch.barriers if b.count is None and mentions(role.body, {b.name})}
    per_replica: dict[str, n.Expr] = {name: n.Index(n.Name(name), (n.Name(var),)) for name in own}
    body = substitute_body(role.body, {axis.var: doubled, **per_replica})
    consumer = replace(role, replicas=n.Replicas(var, n.IntLit(REPLICAS)), body=body)
    grid = replace(launch.grid, axes=(replace(axis, extent=n.Call("cdiv", (axis.extent, n.IntLit(REPLICAS)))),
                                      *launch.grid.axes[1:]))
    arrived = {analysis.ref_name(s.barrier) for s in walk(role.body) if isinstance(s, n.Arrive)}
    barriers = tuple(replace(b, count=n.IntLit(REPLICAS)) if b.name in own else
                     replace(b, arrivals=_times(b.arrivals, REPLICAS)) if b.name in arrived else b
                     for b in launch.barriers)
    smem = tuple(replace(b, stages=n.IntLit(REPLICAS)) if b.name in own else b for b in launch.smem)
    roles = tuple(consumer if r is role else _fill_per_replica(r, own, var, axis.var, doubled) for r in launch.roles)
    pingpongs = launch.pingpongs
    what = ""
    if issues_wgmma(consumer) and not pingpongs:
        pingpongs, what = (n.Pingpong(consumer.name, "mma"),), ", ping-pong around mma"
    new = replace(launch, grid=grid, smem=smem, barriers=barriers, roles=roles, pingpongs=pingpongs)
    out = fit_consumer_regs(with_launch(kernel, launch, new))
    return Mutation(out, f"{role.name} into {REPLICAS} replicas over {axis.var}{what}")


def _fill_per_replica(role: n.Role, own: set[str], var: str, axis_var: str, doubled: n.Expr) -> n.Role:
    """A producer's statements that fill one-tile buffers (or wait on their barriers) become a loop over the
    replicas, each filling its own buffer with its own half of the doubled tile."""
    if not own:
        return role
    out: list[n.Stmt] = []
    group: list[n.Stmt] = []

    def flush() -> None:
        if group:
            mapping = {axis_var: doubled, **{name: n.Index(n.Name(name), (n.Name(var),)) for name in own}}
            out.append(n.For(var, n.IntLit(0), n.IntLit(REPLICAS), substitute_body(tuple(group), mapping)))
            group.clear()

    for stmt in role.body:
        if not isinstance(stmt, n.For) and mentions(stmt, own):
            group.append(stmt)
        else:
            flush()
            out.append(stmt)
    flush()
    return replace(role, body=tuple(out))


def _times(expr: n.Expr, k: int) -> n.Expr:
    if isinstance(expr, n.IntLit):
        return n.IntLit(expr.value * k)
    return n.BinOp(n.BinOpKind.MUL, expr, n.IntLit(k))


MAX_HOISTS = 4  # operand-only reductions hoisted out of the consumers by one `warp_specialize`


def warp_specialize(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    """`specialize` then `split_consumer` in one move: the plain kernel straight to a TMA producer feeding two
    consumers (ping-ponging where the target has wgmma). The intermediate single-consumer schedule is usually
    slower than the plain one, so a search ranked by predicted time rarely keeps it long enough to split it.
    When the consumers ping-pong, the grid becomes persistent too, as in CUTLASS's Hopper ping-pong kernels:
    the producer then fetches a CTA's next point tiles while its consumers finish the current ones (the
    per-replica `empty` barriers make the refill safe). Reductions over a streamed operand alone are hoisted
    into a first launch (`precompute`), as the consumers would otherwise redo them per stage."""
    first = specialize(kernel, rng)
    if first is None:
        return None
    second = split_consumer(first.kernel, rng)
    if second is None:
        return None
    out, what = second.kernel, ""
    launch = main_launch(out)
    if launch.pingpongs and launch.grid.kind is not n.GridKind.PERSISTENT:
        out = with_launch(out, launch, replace(launch, grid=replace(launch.grid, kind=n.GridKind.PERSISTENT)))
        what = ", persistent grid"
    # A consumer that reduces a TMA-fed operand stage on its own (the centroid norms) reads every element of a
    # swizzled tile through the CUDA cores, once per consumer and stage: measured on the H200, that alone
    # made an evolved ping-pong 3x slower than the one with the norms hoisted. Hoist every such reduction.
    for _ in range(MAX_HOISTS):
        hoisted = precompute(out, rng)
        if hoisted is None:
            break
        out, what = hoisted.kernel, f"{what}, {hoisted.description}"
    return Mutation(out, f"specialize ({first.description}), split_consumer ({second.description}){what}")


SPECIALIZING: dict[str, Operator] = {
    "specialize": specialize,
    "split_consumer": split_consumer,
    "warp_specialize": warp_specialize,
}

__all__ = ["SPECIALIZING", "specialize", "split_consumer", "warp_specialize"]
