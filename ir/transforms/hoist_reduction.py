"""hoist_reduction: a reduction that depends only on a streamed operand tile moved out of the compute loop into
a launch of its own, written once to a scratch buffer and read back per tile.

In the fused kmeans assign every CTA recomputes ||c||^2 for every centroid tile it streams: a cast and a row
reduction over a [BK, D] tile, as many CUDA-core operations per tile as the distance epilogue itself.

Precondition, for a loop `for k in 0 .. E` whose body reads an operand tile `t` of a global tensor `g` at an
index that moves with `k` (a `let t = load g[...]`, or a staged shared buffer `t_s[s]` a producer fills from
`g[...]`): a let `v: f32[R] = sum|max|min(..., axis=A)` whose value uses only `t`, lets that do, params, dims
and literals, and whose reduced axis covers a whole dimension of `g`. Effect:

* a new launch before the main one has one CTA per operand tile (`k` over `E`, plus the main grid's axes the
  index uses; the tile keeps the loop's own row count, so it follows the tile param the search moves), with
  one role of `HOIST_WARPS` warps (a new param over the power-of-two warp counts a block holds, `cake.arch`;
  default one warpgroup); it recomputes `v` from a masked load of `g` and stores it to a scratch buffer `v_g`
  (the shape of `g` without the reduced dimension);
* in the loop, `v` becomes a load of `v_g` at the tile's index, or, when a producer streams `t` through
  shared memory, one more TMA copy into a staged `v_s` on the same barrier, read in place.

None when no such reduction exists (or the one named is not one).
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms.sites import main_launch, target_spec
from cake.ir.visit import fresh, identifiers, mentions, rewrite
from cake.ir.visit import walk_stmts as walk

from cake.arch import THREADS_PER_WARP, WARPS_PER_WARPGROUP

HOIST_WARPS = "HOIST_WARPS"
REDUCTIONS = frozenset({"sum", "max", "min"})


def _sites(kernel: n.Kernel) -> list[tuple[n.Role, n.For, _Operand, n.Let]]:
    launch = main_launch(kernel)
    return [site for role in launch.roles for loop in walk(role.body) if isinstance(loop, n.For)
            for site in _hoistable(kernel, launch, role, loop)]


def hoistable(kernel: n.Kernel) -> tuple[str, ...]:
    """The names of the lets `hoist_reduction` can hoist, in program order."""
    return tuple(let.name for _, _, _, let in _sites(kernel))


def hoist_reduction(kernel: n.Kernel, name: str | None = None) -> n.Kernel | None:
    """`kernel` with the reduction let `name` (default: the first hoistable one) hoisted into its own launch."""
    sites = [s for s in _sites(kernel) if name is None or s[3].name == name]
    if not sites:
        return None
    role, loop, operand, let = sites[0]
    return _hoist(kernel, main_launch(kernel), role, loop, operand, let)


def warp_counts(kernel: n.Kernel) -> tuple[int, ...]:
    """Power-of-two warp counts up to what one block holds on the target (`cake.arch`)."""
    spec = target_spec(kernel)
    limit = (spec.threads_per_block_max if spec else 1024) // THREADS_PER_WARP
    return tuple(1 << i for i in range(limit.bit_length()) if 1 << i <= limit)


class _Operand:
    """A streamed operand tile: how the loop refers to it, and the global read that fills it."""

    def __init__(self, ref: str, staged: bool, source: n.Index, tile: n.TileType, copy: n.Copy | None):
        self.ref = ref  # the let name (`ct`) or the staged buffer (`ct_s`)
        self.staged = staged
        self.source = source
        self.tile = tile
        self.copy = copy  # the producer's copy into the staged buffer

    def refers(self, expr: object) -> bool:
        if self.staged:
            return isinstance(expr, n.Index) and isinstance(expr.base, n.Name) and expr.base.id == self.ref
        return isinstance(expr, n.Name) and expr.id == self.ref


def _operands(kernel: n.Kernel, launch: n.Launch, loop: n.For) -> list[_Operand]:
    out = []
    for stmt in loop.body:
        if (isinstance(stmt, n.Let) and stmt.type is not None and isinstance(stmt.value, n.Load)
                and isinstance(stmt.value.source, n.Index) and _moves_with(kernel, stmt.value.source, loop.var)):
            out.append(_Operand(stmt.name, False, stmt.value.source, stmt.type, None))
    for role in launch.roles:
        for stmt in walk(role.body):
            if not (isinstance(stmt, n.Copy) and isinstance(stmt.dest, n.Index)):
                continue
            buf = next((b for b in launch.smem if b.name == analysis.ref_name(stmt.dest)), None)
            if buf is not None and buf.stages is not None and _moves_with(kernel, stmt.source, loop.var):
                out.append(_Operand(buf.name, True, stmt.source, buf.type, stmt))
    return out


def _moves_with(kernel: n.Kernel, source: n.Index, var: str) -> bool:
    return (isinstance(source.base, n.Name) and kernel.tensor(source.base.id) is not None
            and mentions(source.items, {var}))


def _hoistable(kernel: n.Kernel, launch: n.Launch, role: n.Role,
               loop: n.For) -> list[tuple[n.Role, n.For, _Operand, n.Let]]:
    constants = ({p.name for p in kernel.params} | {d.name for d in kernel.dims} | {t.value for t in n.DType}
                 | {v.name for v in kernel.dtype_vars})
    out = []
    for operand in _operands(kernel, launch, loop):
        pure: set[str] = set()
        for stmt in loop.body:
            if not isinstance(stmt, n.Let) or stmt.name == operand.ref:
                continue
            if not _pure(stmt.value, operand, pure | constants) or not _uses_operand(stmt.value, operand, pure):
                continue
            pure.add(stmt.name)
            if _reduction_slot(kernel, stmt, operand) is not None:
                out.append((role, loop, operand, stmt))
    return out


def _pure(node: object, operand: _Operand, allowed: set[str]) -> bool:
    """Whether `node` reads nothing but the operand tile and `allowed` names."""
    if operand.refers(node):
        return True
    if isinstance(node, n.Name):
        return node.id in allowed or (not operand.staged and node.id == operand.ref)
    if isinstance(node, (n.Load, n.Mma)):
        return False
    if isinstance(node, tuple):
        return all(_pure(x, operand, allowed) for x in node)
    fields = getattr(node, "__dataclass_fields__", None)
    return fields is None or all(_pure(getattr(node, f), operand, allowed) for f in fields if f != "span")


def _uses_operand(node: object, operand: _Operand, pure: set[str]) -> bool:
    if operand.refers(node):
        return True
    if isinstance(node, n.Name):
        return node.id in pure
    if isinstance(node, tuple):
        return any(_uses_operand(x, operand, pure) for x in node)
    fields = getattr(node, "__dataclass_fields__", None)
    return fields is not None and any(_uses_operand(getattr(node, f), operand, pure) for f in fields if f != "span")


def _reduction_slot(kernel: n.Kernel, let: n.Let, operand: _Operand) -> int | None:
    """The position in the operand's global index that `let` reduces away (a whole `:` dimension), or None."""
    value = let.value
    if not (isinstance(value, n.Call) and value.func in REDUCTIONS and let.type is not None
            and len(let.type.shape) == len(operand.tile.shape) - 1 and let.type.elem is n.DType.F32):
        return None
    axis = next((k.value for k in value.kwargs if k.name == "axis"), None)
    if not isinstance(axis, n.IntLit):
        return None
    tile_axes = [i for i, item in enumerate(operand.source.items) if isinstance(item, n.Slice)]
    if len(tile_axes) != len(operand.tile.shape) or not 0 <= axis.value < len(tile_axes):
        return None
    slot = tile_axes[axis.value]
    item = operand.source.items[slot]
    assert isinstance(item, n.Slice)
    return slot if item.start is None and item.size is None else None


def _hoist(kernel: n.Kernel, launch: n.Launch, role: n.Role, loop: n.For, operand: _Operand,
           let: n.Let) -> n.Kernel | None:
    slot = _reduction_slot(kernel, let, operand)
    assert slot is not None and let.type is not None and isinstance(operand.source.base, n.Name)
    tensor = kernel.tensor(operand.source.base.id)
    assert tensor is not None
    if not (isinstance(loop.start, n.IntLit) and loop.start.value == 0):
        return None
    taken = ({s.name for s in kernel.scratch} | {t.name for t in kernel.tensors} | {lc.name for lc in kernel.launches}
             | {b.name for lc in kernel.launches for b in (*lc.smem, *lc.barriers)})
    scratch_name = fresh(f"{let.name}_g", taken)
    launch_name = fresh(f"precompute_{let.name}", taken | {scratch_name})
    shape = tuple(d for i, d in enumerate(tensor.type.shape) if i != slot)
    scratch = n.ScratchDecl(scratch_name, n.TileType(n.DType.F32, shape), n.IntLit(0))
    dest_items = tuple(item for i, item in enumerate(operand.source.items) if i != slot)
    dest = n.Index(n.Name(scratch_name), dest_items)

    # The precompute launch: the chain of lets `let` needs, over a masked load of the operand tile.
    needed = _chain(loop.body, let, operand)
    tile_name = operand.ref if not operand.staged else fresh("tile", {s.name for s in needed})
    load = n.Let(tile_name, operand.tile, n.Load(operand.source, masked=True, other=n.IntLit(0)))
    body: tuple[n.Stmt, ...] = (load, *(_to_name(s, operand, tile_name) for s in needed),
                                n.Store(n.Name(let.name), dest, masked=True))
    grid_axes = (n.GridAxis(loop.var, loop.stop),
                 *(a for a in launch.grid.axes if mentions(operand.source.items, {a.var})))
    warps_param = fresh(HOIST_WARPS, set(identifiers(kernel)))
    pre_role = n.Role("main", None, n.UnitKind.WARPS, n.Name(warps_param), None, body)
    pre = n.Launch(launch_name, n.Grid(n.GridKind.TILES, grid_axes), (), (), (), (pre_role,))

    # The main launch reads the result per tile instead of recomputing it.
    if operand.staged:
        assert operand.copy is not None and isinstance(operand.copy.dest, n.Index)
        stage = operand.copy.dest.items
        buf = fresh(f"{let.name}_s", taken | {scratch_name})
        buf_decl = next(b for b in launch.smem if b.name == operand.ref)
        smem = (*launch.smem, n.SmemDecl(buf, buf_decl.stages, let.type, n.Swizzle.NONE))
        extra = replace(operand.copy, source=dest, dest=n.Index(n.Name(buf), stage))
        roles = tuple(_after_copy(r, operand.copy, extra) for r in launch.roles)
        barrier = analysis.ref_name(operand.copy.signals)
        tile_bytes = n.BinOp(n.BinOpKind.MUL, let.type.shape[0], n.IntLit(n.DType.F32.bytes))
        barriers = tuple(replace(b, tx=n.BinOp(n.BinOpKind.ADD, b.tx, tile_bytes)) if b.name == barrier and b.tx else b
                         for b in launch.barriers)
        consumer_stage = _consumer_stage(loop, operand)
        if consumer_stage is None:
            return None
        read: n.Expr = n.Index(n.Name(buf), consumer_stage)
        launch = replace(launch, smem=smem, barriers=barriers, roles=roles)
        role = next(r for r in launch.roles if r.name == role.name)
        loop = next(s for s in walk(role.body) if isinstance(s, n.For) and s.var == loop.var
                    and mentions(s.body, {let.name}))
    else:
        read = n.Load(dest, masked=True, other=n.IntLit(0))
    new_body = _drop_dead(tuple(replace(s, value=read) if s is let else s for s in loop.body), operand)
    new_role = replace(role, body=_replace_stmt(role.body, loop, replace(loop, body=new_body)))
    main = replace(launch, roles=tuple(new_role if r is role else r for r in launch.roles))
    launches = []
    for lc in kernel.launches:
        if lc is main_launch(kernel):
            launches += [pre, main]
        else:
            launches.append(lc)
    counts = warp_counts(kernel)
    default = WARPS_PER_WARPGROUP if WARPS_PER_WARPGROUP in counts else counts[-1]
    params = (*kernel.params, n.Param(warps_param, default, n.ValueSet(counts)))
    return replace(kernel, params=params, scratch=(*kernel.scratch, scratch), launches=tuple(launches))


def _chain(body: tuple[n.Stmt, ...], let: n.Let, operand: _Operand) -> list[n.Let]:
    """The lets `let` depends on (in program order, ending with `let`), the operand excluded."""
    lets = {s.name: s for s in body if isinstance(s, n.Let)}
    wanted = {let.name}
    for stmt in reversed([s for s in body if isinstance(s, n.Let)]):
        if stmt.name in wanted and stmt.name != operand.ref:
            wanted |= {name for name in lets if name != operand.ref and mentions(stmt.value, {name})}
    return [s for s in body if isinstance(s, n.Let) and s.name in wanted and s.name != operand.ref]


def _to_name(stmt: n.Let, operand: _Operand, name: str) -> n.Let:
    """`stmt` reading the operand as the register tile `name` (a staged `t_s[s]` becomes `name`)."""
    if not operand.staged:
        return stmt
    return replace(stmt, value=rewrite(stmt.value, lambda e: n.Name(name) if operand.refers(e) else None))


def _consumer_stage(loop: n.For, operand: _Operand) -> tuple[n.IndexItem, ...] | None:
    for stmt in walk(loop.body):
        for expr in analysis.stmt_exprs(stmt):
            for sub in analysis.walk_expr(expr):
                if operand.refers(sub):
                    return sub.items  # type: ignore[attr-defined, no-any-return]
    return None


def _after_copy(role: n.Role, copy: n.Copy, extra: n.Copy) -> n.Role:
    def insert(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        for stmt in body:
            if isinstance(stmt, n.For):
                stmt = replace(stmt, body=insert(stmt.body))
            out.append(stmt)
            if stmt is copy:
                out.append(extra)
        return tuple(out)

    return replace(role, body=insert(role.body))


def _replace_stmt(body: tuple[n.Stmt, ...], old: n.Stmt, new: n.Stmt) -> tuple[n.Stmt, ...]:
    out = []
    for stmt in body:
        if stmt is old:
            stmt = new
        elif isinstance(stmt, n.For):
            stmt = replace(stmt, body=_replace_stmt(stmt.body, old, new))
        out.append(stmt)
    return tuple(out)


def _drop_dead(body: tuple[n.Stmt, ...], operand: _Operand) -> tuple[n.Stmt, ...]:
    """Remove lets nothing reads any more (the hoisted chain), keeping the operand's own load."""
    while True:
        dead = [i for i, s in enumerate(body) if isinstance(s, n.Let) and s.name != operand.ref
                and not mentions(body[i + 1:], {s.name})]
        if not dead:
            return body
        body = tuple(s for i, s in enumerate(body) if i not in dead)

