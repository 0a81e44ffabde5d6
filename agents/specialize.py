"""Structural operators that change a schedule's warp roles.

* `specialize`: split a single compute role into a copy **producer** and a compute **consumer**. The
  global tile loads inside the consumer's pipelined loop become TMA copies into staged shared buffers,
  fed by the producer through `full`/`empty` mbarriers (the producer waits `empty[s]`, copies with
  `signals full[s]`; the consumer waits `full[s]`, reads the stage, and releases it with `arrive`).
* `split_consumer`: give the compute role two replicas, each owning half of a doubled point tile (the
  grid's first axis covers twice the rows per CTA); barriers the role arrives on expect one arrival per
  replica. With `pingpong` on top, one replica's argmin overlaps the other's mma.

These are the moves from the plain fused kernel toward DESIGN.md's ping-pong schedule. Each returns None
when its precondition does not hold; legality (TMA boxes, arch features, backend capability) is the
checker's call.
"""

from __future__ import annotations

import random
from dataclasses import replace

from cake.agents.features import main_launch
from cake.agents.mutations import Mutation, Operator
from cake.ir import nodes as n

PRODUCER = "producer"
PRODUCER_REGS = 40  # a copy-only warpgroup needs few registers; setmaxnreg hands the rest to consumers
REPLICA_VAR = "w"


def _is_mma_role(role: n.Role) -> bool:
    return any(isinstance(getattr(s, "value", None), n.Mma) for s in _walk(role.body))


def _walk(body: tuple[n.Stmt, ...]) -> list[n.Stmt]:
    out: list[n.Stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, n.For):
            out += _walk(stmt.body)
    return out


def _elem_bytes(elem: n.ElemType) -> n.Expr:
    return n.IntLit(elem.bytes) if isinstance(elem, n.DType) else n.SizeOf(elem)


def _product(exprs: tuple[n.Expr, ...]) -> n.Expr:
    out = exprs[0]
    for e in exprs[1:]:
        out = n.BinOp(n.BinOpKind.MUL, out, e)
    return out


def specialize(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    launch = main_launch(kernel)
    if len(launch.roles) != 1 or launch.roles[0].replicas is not None:
        return None
    role = launch.roles[0]
    loops = [s for s in role.body if isinstance(s, n.For) and s.pipeline is not None]
    if not loops:
        return None
    loop = loops[0]
    assert loop.pipeline is not None
    stage, stages = loop.pipeline.stage_var, loop.pipeline.stages
    loads = [s for s in loop.body
             if isinstance(s, n.Let) and isinstance(s.value, n.Load) and isinstance(s.value.source, n.Index)
             and s.type is not None]
    if not loads:
        return None
    taken = {b.name for b in launch.smem} | {b.name for b in launch.barriers}
    full, empty = _fresh("full", taken), _fresh("empty", taken)
    smem: list[n.SmemDecl] = []
    copies: list[n.Stmt] = [n.Wait(n.Index(n.Name(empty), (n.Name(stage),)))]
    tx: list[n.Expr] = []
    renamed: dict[int, n.Stmt] = {}
    for let in loads:
        assert let.type is not None and isinstance(let.value, n.Load) and isinstance(let.value.source, n.Index)
        buf = _fresh(f"{let.name}_s", taken)
        taken.add(buf)
        smem.append(n.SmemDecl(buf, stages, let.type, n.Swizzle.B128))
        copies.append(n.Copy(let.value.source, n.Index(n.Name(buf), (n.Name(stage),)), n.CopyKind.TMA,
                             masked=let.value.masked, signals=n.Index(n.Name(full), (n.Name(stage),))))
        tx.append(n.BinOp(n.BinOpKind.MUL, _product(let.type.shape), _elem_bytes(let.type.elem)))
        renamed[id(let)] = replace(let, value=n.Index(n.Name(buf), (n.Name(stage),)))
    tx_sum = tx[0]
    for t in tx[1:]:
        tx_sum = n.BinOp(n.BinOpKind.ADD, tx_sum, t)
    body = (n.Wait(n.Index(n.Name(full), (n.Name(stage),))),
            *(renamed.get(id(s), s) for s in loop.body),
            n.Arrive(n.Index(n.Name(empty), (n.Name(stage),))))
    consumer = replace(role, name="consumer" if role.name != "consumer" else role.name,
                       body=tuple(replace(s, body=body) if s is loop else s for s in role.body))
    warpgroups = role.unit is n.UnitKind.WARPGROUPS
    producer = n.Role(PRODUCER, None, role.unit, n.IntLit(1),
                      n.IntLit(PRODUCER_REGS) if warpgroups else None,
                      (replace(loop, body=tuple(copies)),))
    barriers = (*launch.barriers,
                n.MbarrierDecl(full, stages, n.IntLit(1), tx_sum),
                n.MbarrierDecl(empty, stages, n.IntLit(1), None, initially_free=True))
    new = replace(launch, smem=(*launch.smem, *smem), barriers=barriers, roles=(producer, consumer))
    names = ", ".join(s.name for s in loads)
    return Mutation(_with_launch(kernel, launch, new), f"specialize: TMA producer feeds {names} to {consumer.name}")


def _fresh(base: str, taken: set[str]) -> str:
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name


def _with_launch(kernel: n.Kernel, old: n.Launch, new: n.Launch) -> n.Kernel:
    return replace(kernel, launches=tuple(new if lc is old else lc for lc in kernel.launches))


def split_consumer(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    launch = main_launch(kernel)
    mma_roles = [r for r in launch.roles if r.replicas is None and _is_mma_role(r)]
    if len(mma_roles) != 1 or not launch.grid.axes:
        return None
    role = mma_roles[0]
    axis = launch.grid.axes[0]
    var = REPLICA_VAR if REPLICA_VAR != axis.var else "w2"
    # Row tile t of the doubled grid becomes tiles 2t + w: substitute in the consumer's body only.
    doubled = n.BinOp(n.BinOpKind.ADD, n.BinOp(n.BinOpKind.MUL, n.Name(axis.var), n.IntLit(2)), n.Name(var))
    body = _substitute_body(role.body, axis.var, doubled)
    consumer = replace(role, replicas=n.Replicas(var, n.IntLit(2)), body=body)
    grid = replace(launch.grid, axes=(replace(axis, extent=n.Call("cdiv", (axis.extent, n.IntLit(2)))),
                                      *launch.grid.axes[1:]))
    arrived = {_barrier_name(s.barrier) for s in _walk(role.body) if isinstance(s, n.Arrive)}
    barriers = tuple(replace(b, arrivals=_times_two(b.arrivals)) if b.name in arrived else b
                     for b in launch.barriers)
    roles = tuple(consumer if r is role else r for r in launch.roles)
    new = replace(launch, grid=grid, barriers=barriers, roles=roles)
    return Mutation(_with_launch(kernel, launch, new), f"split_consumer: {role.name} into 2 replicas over {axis.var}")


def _times_two(expr: n.Expr) -> n.Expr:
    if isinstance(expr, n.IntLit):
        return n.IntLit(expr.value * 2)
    return n.BinOp(n.BinOpKind.MUL, expr, n.IntLit(2))


def _barrier_name(ref: n.Index | n.Name) -> str:
    base = ref.base if isinstance(ref, n.Index) else ref
    return base.id if isinstance(base, n.Name) else ""


def _substitute_body(body: tuple[n.Stmt, ...], name: str, value: n.Expr) -> tuple[n.Stmt, ...]:
    return tuple(_substitute(s, name, value) for s in body)  # type: ignore[misc]


def _substitute(node: object, name: str, value: n.Expr) -> object:
    """Replace every `Name(name)` under `node` by `value` (nodes are frozen dataclasses; rebuild)."""
    if isinstance(node, n.Name):
        return value if node.id == name else node
    if isinstance(node, tuple):
        items = tuple(_substitute(x, name, value) for x in node)
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    fields = getattr(node, "__dataclass_fields__", None)
    if fields is None:
        return node
    changes = {}
    for f in fields:
        if f == "span":
            continue
        old = getattr(node, f)
        new = _substitute(old, name, value)
        if new is not old:
            changes[f] = new
    return replace(node, **changes) if changes else node  # type: ignore[type-var]


SPECIALIZING: dict[str, Operator] = {
    "specialize": specialize,
    "split_consumer": split_consumer,
}

__all__ = ["SPECIALIZING", "specialize", "split_consumer"]
