"""tma_producer: split a single compute role into a TMA copy **producer** and a compute **consumer**.

Precondition: the main launch has one role, without replicas, whose body has a pipelined loop that loads at
least one tile of a global tensor (a typed `let t = load g[...]` whose out-of-range fill is 0, as TMA's).
Effect:

* loads inside the pipelined loop become TMA copies into `STAGES`-deep shared buffers behind a `full`/`empty`
  mbarrier pair: the producer waits `empty[s]` and copies with `signals full[s]`; the consumer waits `full[s]`
  and releases the stage with `arrive empty[s]` after its last read;
* loads before the loop (the point tile) go to a one-tile buffer with its own `<name>_full`/`<name>_empty`
  pair (so a persistent grid may refill it);
* matrix tiles are read in place from shared memory (128-byte swizzle); vectors keep a register copy;
* on a target with setmaxnreg (`cake.arch`) the producer is one warpgroup whose budget is a new param
  `PRODUCER_REGS` over the target's setmaxnreg counts (default the fewest); the consumer is regrouped into
  warpgroups and its budget is a new param `CONSUMER_REGS` over the same counts, defaulting to what the
  register file leaves it (`fit_consumer_regs`); both are the search's to move;
* on a target with wgmma, an mma whose operands now live in shared memory is committed (`commit_wgmma`).

The pipeline depth is the loop's own `STAGES`, untouched: the search moves it. None when the precondition
does not hold; legality (TMA boxes, arch features, backend capability) is the checker's call.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms import apply
from cake.ir.transforms.as_warpgroups import regrouped
from cake.ir.transforms.commit_wgmma import commit_wgmma
from cake.ir.transforms.drop_unused_params import drop_unused_params
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.sites import has_feature, main_launch, register_budgets
from cake.ir.visit import fresh, identifiers, mentions, substitute_body, with_launch

from cake.arch import Feature

PRODUCER = "producer"
CONSUMER = "consumer"
PRODUCER_REGS = "PRODUCER_REGS"
CONSUMER_REGS = "CONSUMER_REGS"


def _elem_bytes(elem: n.ElemType) -> n.Expr:
    return n.IntLit(elem.bytes) if isinstance(elem, n.DType) else n.SizeOf(elem)


def _product(exprs: tuple[n.Expr, ...]) -> n.Expr:
    out = exprs[0]
    for e in exprs[1:]:
        out = n.BinOp(n.BinOpKind.MUL, out, e)
    return out


def tile_bytes(tile: n.TileType) -> n.Expr:
    return n.BinOp(n.BinOpKind.MUL, _product(tile.shape), _elem_bytes(tile.elem))


def tma_load(kernel: n.Kernel, stmt: n.Stmt) -> n.Let | None:
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


def _in_registers(tile: n.TileType) -> bool:
    """Whether the consumer keeps a register copy of a tile it receives in shared memory: vectors (a row of
    norms) yes, one read per stage; matrix tiles are read in place (mma operands, reductions)."""
    return len(tile.shape) < 2


def _swizzle(tile: n.TileType) -> n.Swizzle:
    """128-byte swizzle for matrix tiles (what wgmma descriptors and conflict-free reads want); none for vectors."""
    return n.Swizzle.B128 if len(tile.shape) >= 2 else n.Swizzle.NONE


def fed_tiles(kernel: n.Kernel) -> tuple[str, ...]:
    """The lets `tma_producer` would turn into TMA copies (empty when it does not apply)."""
    site = _site(kernel)
    return () if site is None else tuple(s.name for s in (*site[3], *site[2]))


def _site(kernel: n.Kernel) -> tuple[n.Role, int, list[n.Let], list[n.Let]] | None:
    launch = main_launch(kernel)
    if len(launch.roles) != 1 or launch.roles[0].replicas is not None:
        return None
    role = launch.roles[0]
    loop_at = next((i for i, s in enumerate(role.body) if isinstance(s, n.For) and s.pipeline is not None), None)
    if loop_at is None:
        return None
    loop = role.body[loop_at]
    assert isinstance(loop, n.For)
    staged = [s for s in (tma_load(kernel, s) for s in loop.body) if s is not None]
    tiles = [s for s in (tma_load(kernel, s) for s in role.body[:loop_at]) if s is not None]
    return (role, loop_at, staged, tiles) if staged else None


def _budget_param(kernel: n.Kernel, base: str, default: int) -> tuple[str, n.Kernel]:
    budgets = register_budgets(kernel)
    name = fresh(base, set(identifiers(kernel)))
    return name, replace(kernel, params=(*kernel.params, n.Param(name, default, n.ValueSet(budgets))))


def tma_producer(kernel: n.Kernel) -> n.Kernel | None:
    site = _site(kernel)
    if site is None:
        return None
    launch = main_launch(kernel)
    role, loop_at, staged, tiles = site
    loop = role.body[loop_at]
    assert isinstance(loop, n.For) and loop.pipeline is not None
    stage, stages = loop.pipeline.stage_var, loop.pipeline.stages
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
        if stmt not in tiles:
            consumer_body.append(stmt)
            continue
        assert isinstance(stmt, n.Let) and stmt.type is not None and isinstance(stmt.value, n.Load)
        buf, t_full, t_empty = (fresh(f"{stmt.name}{suffix}", taken) for suffix in ("_s", "_full", "_empty"))
        taken |= {buf, t_full, t_empty}
        smem.append(n.SmemDecl(buf, None, stmt.type, _swizzle(stmt.type)))
        barriers += [n.MbarrierDecl(t_full, None, n.IntLit(1), tile_bytes(stmt.type)),
                     n.MbarrierDecl(t_empty, None, n.IntLit(1), None, initially_free=True)]
        assert isinstance(stmt.value.source, n.Index)
        producer_body += [n.Wait(n.Name(t_empty)),
                          n.Copy(stmt.value.source, n.Name(buf), n.CopyKind.TMA, masked=stmt.value.masked,
                                 signals=n.Name(t_full))]
        consumer_body.append(n.Wait(n.Name(t_full)))
        if _in_registers(stmt.type):
            consumer_body.append(replace(stmt, value=n.Name(buf)))
        else:
            rename[stmt.name] = n.Name(buf)
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
        tx.append(tile_bytes(let.type))
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
    # (the loop's own renames were applied above; outside it the staged names are out of scope)
    body = substitute_body(rest, {k: v for k, v in rename.items() if k not in {s.name for s in staged}})
    for names, release in releases:
        body = _after_last_use(body, names, release)
    producer_body.append(replace(loop, body=tuple(copies)))
    hopper = has_feature(kernel, Feature.SETMAXNREG)
    consumer = replace(role, name=CONSUMER, body=body)
    if hopper:
        consumer = regrouped(consumer, analysis.default_env(kernel)) or consumer
        budgets = register_budgets(kernel)
        regs, kernel = _budget_param(kernel, PRODUCER_REGS, budgets[0])
        if consumer.regs is None:
            consumer_regs, kernel = _budget_param(kernel, CONSUMER_REGS, budgets[-1])
            consumer = replace(consumer, regs=n.Name(consumer_regs))
        producer = n.Role(PRODUCER, None, n.UnitKind.WARPGROUPS, n.IntLit(1), n.Name(regs), tuple(producer_body))
    else:
        producer = n.Role(PRODUCER, None, role.unit, n.IntLit(1), None, tuple(producer_body))
    new = replace(launch, smem=(*launch.smem, *smem), barriers=(*launch.barriers, *barriers),
                  roles=(producer, consumer))
    out = apply(drop_unused_params, with_launch(kernel, launch, new))
    out = apply(commit_wgmma, out)
    return apply(fit_consumer_regs, out) if hopper else out
