"""Which scratch buffers a schedule overwrites whole before anything reads them: their `init` fill is dead work.

A `scratch` buffer is filled with its init value before the first launch (`ScratchDecl`). The fill can be
skipped when the first launch that touches the buffer only stores to it, and one of its stores provably
writes every element (`overwriting_launch`). The host then saves a memset per call (`cake export`'s runtime).

The proof is syntactic and conservative: a store in a role body of a one-CTA-per-tile grid, at the top level
or inside loops `for v in 0 .. STOP` (the IR has no branch or early exit, so every CTA runs every iteration),
whose index covers each dim of the buffer's declared shape with
- `:` (the whole dim),
- a grid or loop variable whose extent is that dim (`b` with `grid b in B` over a dim `B`; `t` with
  `for t in 0 .. NT` over a dim `NT`), or
- `g*W : +W` with `grid g in cdiv(DIM, W)` or `for g in 0 .. cdiv(DIM, W)` (a tiled dim; a masked store keeps
  it in bounds), or over a dim `N * W` with `grid g in N` (slots of W rows, one a program: a dim declared as
  the exact multiple),
with a different variable for each dim, and every grid axis and every enclosing loop's variable among them: a
zero extent then means an empty buffer, never a store skipped over a non-empty one, and no two dims share a
variable (`[b, b]` writes a diagonal). Anything else (a load, a copy or an atomic on the buffer in that
launch, a persistent grid, a `let` or assignment rebinding a grid or loop variable's name, an index it cannot
match) keeps the fill. Only the declared shape is covered: an allocation padded
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
    grid = {axis.var: printer.expr(axis.extent) for axis in launch.grid.axes}
    covered = False
    for role in launch.roles:
        sites = list(walk_body(role.body))
        rebound = {site.stmt.name for site in sites if isinstance(site.stmt, (n.Let, n.Assign))}
        for site in sites:
            stmt = site.stmt
            if isinstance(stmt, n.For):
                if mentions((stmt.start, stmt.stop, stmt.pipeline, stmt.expect), name):
                    return False
                continue  # its body is walked statement by statement
            if isinstance(stmt, n.Store) and isinstance(stmt.dest.base, n.Name) and stmt.dest.base.id == scratch.name:
                if mentions((stmt.value, stmt.dest.items), name):
                    return False  # reads the buffer it writes
                extents = _extents(grid, site.loops)
                if extents is not None and not (set(extents) & rebound) and \
                        _covers(stmt.dest.items, scratch.type.shape, extents):
                    covered = True
                continue
            if mentions(stmt, name):
                return False  # a read (load, copy source), an atomic or a copy into it: the fill may matter
    return covered


def _extents(grid: dict[str, str], loops: tuple[n.For, ...]) -> dict[str, str] | None:
    """Each variable a store inside `loops` sees, with its extent (a loop's shadows a grid axis of its name),
    or None when a loop does not count from 0 to a bound fixed before it starts."""
    extents = dict(grid)
    for loop in loops:
        if not (isinstance(loop.start, n.IntLit) and loop.start.value == 0) or loop.expect is not None:
            return None
        extents[loop.var] = printer.expr(loop.stop)
    return extents


def _covers(items: tuple[n.IndexItem, ...], shape: tuple[n.Expr, ...], extents: dict[str, str]) -> bool:
    """Whether a store at `items`, run for every value of every variable in `extents` (grid axes and
    enclosing loops), writes every element of a buffer of `shape`."""
    if len(items) != len(shape):
        return False
    used: list[str] = []
    for item, dim in zip(items, shape, strict=True):
        var = _covering_var(item, dim, extents)
        if var is None:
            return False
        if var:
            used.append(var)
    return len(used) == len(set(used)) and set(used) == set(extents)


def _covering_var(item: n.IndexItem, dim: n.Expr, extents: dict[str, str]) -> str | None:
    """The variable whose values make `item` sweep all of `dim` ("" for `:`), or None."""
    if isinstance(item, n.NewAxis):
        return None
    if isinstance(item, n.Slice):
        if item.start is None and item.size is None:
            return ""
        if item.start is None or item.size is None:
            return None
        tile = _grid_times(item.start, item.size, extents)
        if tile is None:
            return None
        slots = printer.expr(n.BinOp(n.BinOpKind.MUL, n.Name(extents[tile]), item.size))  # `N * W`, N a name
        tiled = extents[tile] == printer.expr(n.Call("cdiv", (dim, item.size)))
        return tile if tiled or (extents[tile].isidentifier() and printer.expr(dim) == slots) else None
    if isinstance(item, n.Name):
        return item.id if item.id in extents and extents[item.id] == printer.expr(dim) else None
    return None


def _grid_times(start: n.Expr, width: n.Expr, extents: dict[str, str]) -> str | None:
    """`g` when `start` is `g * width` (either order) for a grid variable `g`, else None."""
    if not (isinstance(start, n.BinOp) and start.op is n.BinOpKind.MUL):
        return None
    text = printer.expr(width)
    for var, factor in ((start.lhs, start.rhs), (start.rhs, start.lhs)):
        if isinstance(var, n.Name) and var.id in extents and printer.expr(factor) == text:
            return var.id
    return None
