"""Which scratch buffers a schedule overwrites whole before anything reads them: their `init` fill is dead work.

A `scratch` buffer is filled with its init value before the first launch (`ScratchDecl`). The fill can be
skipped when the first launch that touches the buffer only stores to it, and one of its stores provably
writes every element (`overwriting_launch`). The host then saves a memset per call (`cake export`'s runtime).

The proof is syntactic and conservative: a store at the top level of a role body (executed once by every CTA
of a one-CTA-per-tile grid), whose index covers each dim of the buffer's declared shape with
- `:` (the whole dim),
- a grid variable whose extent is that dim (`b` with `grid b in B` over a dim `B`), or
- `g*W : +W` with `grid g in cdiv(DIM, W)` (a tiled dim; a masked store keeps it in bounds).
Anything else (a load, a copy or an atomic on the buffer in that launch, a store inside a loop, a persistent
grid, an index it cannot match) keeps the fill. Only the declared shape is covered: an allocation padded
beyond it (TMA boxes, 16-byte rows) still needs its padding set, which the host decides per shape.
"""

from __future__ import annotations

from cake.ir import nodes as n
from cake.ir import printer
from cake.ir.visit import mentions, walk_body


def overwriting_launch(kernel: n.Kernel, scratch: n.ScratchDecl) -> str | None:
    """The launch that overwrites every element of `scratch` before any launch reads it, or None."""
    name = frozenset({scratch.name})
    for launch in kernel.launches:
        if mentions(launch, name):
            return launch.name if _overwrites(launch, scratch) else None
    return None  # no launch touches it: nothing reads the fill either, but nothing needs it skipped


def overwritten_scratch(kernel: n.Kernel) -> dict[str, str]:
    """Each scratch buffer whose init fill is dead, with the launch that overwrites it."""
    out = {}
    for decl in kernel.scratch:
        launch = overwriting_launch(kernel, decl)
        if launch is not None:
            out[decl.name] = launch
    return out


def _overwrites(launch: n.Launch, scratch: n.ScratchDecl) -> bool:
    name = frozenset({scratch.name})
    if launch.grid.kind is not n.GridKind.TILES:
        return False
    if mentions((launch.grid, launch.smem, launch.tmem, launch.barriers), name):
        return False
    extents = {axis.var: printer.expr(axis.extent) for axis in launch.grid.axes}
    covered = False
    for role in launch.roles:
        for site in walk_body(role.body):
            stmt = site.stmt
            if isinstance(stmt, n.For):
                if mentions((stmt.start, stmt.stop, stmt.pipeline, stmt.expect), name):
                    return False
                continue  # its body is walked statement by statement
            if isinstance(stmt, n.Store) and isinstance(stmt.dest.base, n.Name) and stmt.dest.base.id == scratch.name:
                if mentions((stmt.value, stmt.dest.items), name):
                    return False  # reads the buffer it writes
                if not site.loops and _covers(stmt.dest.items, scratch.type.shape, extents):
                    covered = True
                continue
            if mentions(stmt, name):
                return False  # a read (load, copy source), an atomic or a copy into it: the fill may matter
    return covered


def _covers(items: tuple[n.IndexItem, ...], shape: tuple[n.Expr, ...], extents: dict[str, str]) -> bool:
    """Whether a store at `items`, run once per CTA of a grid with these axis extents, writes every element
    of a buffer of `shape`."""
    if len(items) != len(shape):
        return False
    return all(_covers_dim(item, dim, extents) for item, dim in zip(items, shape, strict=True))


def _covers_dim(item: n.IndexItem, dim: n.Expr, extents: dict[str, str]) -> bool:
    if isinstance(item, n.NewAxis):
        return False
    if isinstance(item, n.Slice):
        if item.start is None and item.size is None:
            return True
        if item.start is None or item.size is None:
            return False
        tile = _grid_times(item.start, item.size, extents)
        if tile is None:
            return False
        return extents[tile] == printer.expr(n.Call("cdiv", (dim, item.size)))
    if isinstance(item, n.Name):
        return item.id in extents and extents[item.id] == printer.expr(dim)
    return False


def _grid_times(start: n.Expr, width: n.Expr, extents: dict[str, str]) -> str | None:
    """`g` when `start` is `g * width` (either order) for a grid variable `g`, else None."""
    if not (isinstance(start, n.BinOp) and start.op is n.BinOpKind.MUL):
        return None
    text = printer.expr(width)
    for var, factor in ((start.lhs, start.rhs), (start.rhs, start.lhs)):
        if isinstance(var, n.Name) and var.id in extents and printer.expr(factor) == text:
            return var.id
    return None
