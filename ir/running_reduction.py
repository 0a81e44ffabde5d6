"""Running reductions: a row minimum (maximum) and its position that a role carries through a loop.

    let best: f32[BN] = inf                          # before the loop
    let besti: i32[BN] = 0
    for k in 0 .. cdiv(K, BK) {
      ...
      let m: f32[BN] = min(dist, axis=1)             # this iteration's row minimum
      let i: i32[BN] = argmin(dist, axis=1) + k*BK   # and where it is (`+ offset` optional)
      besti = where(m < best, i, besti)              # the position first: it compares with the old minimum
      best = minimum(m, best)
    }

A row's minimum over the whole loop is the minimum of each thread's minimum over its own columns, and with strict
comparisons the first position wins in both orders, so where the row is spread over several threads (an mma
fragment: a quad of lanes, or warps that split the columns) the merge across them may run once after the loop
instead of once per iteration (`defer ROLE best, besti`). This module says which loops have that shape; the
checker (E0415), the pass `defer_merge` and the CUDA backend read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake.ir import nodes as n
from cake.ir.visit import StmtSite, mentions, stmt_exprs, walk_body

# the reduction, its position, the elementwise running update, the comparison that prefers the new value
KINDS = {"<": ("min", "argmin", "minimum", n.BinOpKind.LT), ">": ("max", "argmax", "maximum", n.BinOpKind.GT)}


@dataclass(frozen=True, slots=True)
class RunningReduction:
    value: str  # the running row minimum (maximum)
    index: str | None  # its position, when carried
    loop: n.For  # the loop it runs through
    reduced: str  # the let of this iteration's row minimum
    position: str | None  # the let of this iteration's position
    better: str  # "<" for min/argmin, ">" for max/argmax


def _call(expr: n.Expr, func: str) -> n.Call | None:
    return expr if isinstance(expr, n.Call) and expr.func == func else None


def _along_rows(call: n.Call) -> n.Name | None:
    """The reduced tile of `f(tile, axis=1)` (or axis=-1), None for any other form."""
    axis = next((k.value for k in call.kwargs if k.name == "axis"), None)
    if len(call.args) != 1 or not isinstance(call.args[0], n.Name) or not isinstance(axis, (n.IntLit, n.UnaryOp)):
        return None
    along = axis.value if isinstance(axis, n.IntLit) else \
        -axis.operand.value if isinstance(axis.operand, n.IntLit) and axis.op is n.UnaryOpKind.NEG else None
    return call.args[0] if along in (1, -1) else None


def running_reduction(role: n.Role, names: tuple[str, ...]) -> RunningReduction | str:
    """The running reduction `names` (the value, then optionally its position) form in `role`, or why they do not."""
    if not 1 <= len(names) <= 2:
        return "name the running value and, optionally, its position"
    value, index = names[0], (names[1] if len(names) == 2 else None)
    sites = list(walk_body(role.body))
    assigns = {name: [s for s in sites if isinstance(s.stmt, n.Assign) and s.stmt.name == name] for name in names}
    for name, found in assigns.items():
        if len(found) != 1 or not found[0].loops:
            return f"`{name}` is not assigned exactly once, inside a loop"
    update = assigns[value][0]
    block, loop = update.path[:-1], update.loops[-1]
    assert isinstance(update.stmt, n.Assign)
    reduced, better = _running_update(update.stmt)
    if reduced is None or better is None:
        return f"`{value}` is not updated as `{value} = minimum(m, {value})` (or maximum) of a row reduction `m`"
    lets = {s.stmt.name: s for s in sites if isinstance(s.stmt, n.Let)}
    reduction, position_of, _, _ = KINDS[better]
    m_site = lets.get(reduced)
    m_call = _call(m_site.stmt.value, reduction) if m_site is not None and isinstance(m_site.stmt, n.Let) else None
    tile = _along_rows(m_call) if m_call is not None else None
    if m_site is None or m_site.path[:-1] != block or tile is None:
        return f"`{reduced}` is not `{reduction}(tile, axis=1)` in the loop that updates `{value}`"
    position = None
    if index is not None:
        position = _position_update(assigns[index][0], index, value, reduced, better)
        if position is None or assigns[index][0].path[:-1] != block or assigns[index][0].path > update.path:
            return (f"`{index}` is not updated as `{index} = where({reduced} {'<' if better == '<' else '>'} {value}, "
                    f"i, {index})` before `{value}`, in its loop")
        i_site = lets.get(position)
        if i_site is None or i_site.path[:-1] != block or not _is_position(i_site, position_of, tile, lets):
            return f"`{position}` is not `{position_of}({tile.id}, axis=1)` (plus an offset) in the loop"
    for name in names:
        declared = lets.get(name)
        if declared is None or any(loop is outer for outer in declared.loops):
            return f"`{name}` is not declared before its loop"
    private = {reduced} | ({position} if position else set())
    updates = {id(update.stmt)} | ({id(assigns[index][0].stmt)} if index else set())
    for site in sites:
        if id(site.stmt) in updates or (isinstance(site.stmt, n.Let) and site.stmt.name in private):
            continue
        read = stmt_exprs(site.stmt)
        if mentions(read, frozenset(private)):
            return f"the loop's partial `{'`, `'.join(sorted(private))}` is read elsewhere"
        if any(loop is outer for outer in site.loops) and mentions(read, frozenset(names)):
            return f"`{'`, `'.join(names)}` is read inside the loop other than by its update"
    return RunningReduction(value, index, loop, reduced, position, better)


def running_reductions(role: n.Role) -> list[RunningReduction]:
    """Every running reduction in `role`: a value with its position where one is carried beside it."""
    out = []
    sites = list(walk_body(role.body))
    for site in sites:
        stmt = site.stmt
        if not isinstance(stmt, n.Assign):
            continue
        reduced, better = _running_update(stmt)
        if reduced is None or better is None:
            continue
        positions = [s.stmt.name for s in sites if isinstance(s.stmt, n.Assign) and s.path[:-1] == site.path[:-1]
                     and _position_update(s, s.stmt.name, stmt.name, reduced, better) is not None]
        pairs: list[tuple[str, ...]] = [(stmt.name, p) for p in positions]
        for names in pairs or [(stmt.name,)]:
            found = running_reduction(role, names)
            if isinstance(found, RunningReduction):
                out.append(found)
    return out


def _running_update(stmt: n.Assign) -> tuple[str | None, str | None]:
    """(m, better) of `v = minimum(m, v)` / `minimum(v, m)` (maximum: ">")."""
    for better, (_, _, update, _) in KINDS.items():
        call = _call(stmt.value, update)
        if call is None or len(call.args) != 2:
            continue
        a, b = call.args
        for mine, other in ((b, a), (a, b)):
            if isinstance(mine, n.Name) and mine.id == stmt.name and isinstance(other, n.Name) and other.id != stmt.name:
                return other.id, better
    return None, None


def _position_update(site: StmtSite, index: str, value: str, reduced: str, better: str) -> str | None:
    """i of `index = where(m < value, i, index)` (`>` for a maximum), None for any other form."""
    stmt = site.stmt
    call = _call(stmt.value, "where") if isinstance(stmt, n.Assign) else None
    if call is None or len(call.args) != 3:
        return None
    cond, new, old = call.args
    op = KINDS[better][3]
    if not (isinstance(cond, n.BinOp) and cond.op is op and isinstance(cond.lhs, n.Name) and cond.lhs.id == reduced
            and isinstance(cond.rhs, n.Name) and cond.rhs.id == value):
        return None
    if not (isinstance(new, n.Name) and isinstance(old, n.Name) and old.id == index):
        return None
    return new.id


def _is_position(site: StmtSite, func: str, tile: n.Name, lets: dict[str, StmtSite]) -> bool:
    """`func(tile, axis=1)`, or that plus an offset that reads no tile the role binds."""
    assert isinstance(site.stmt, n.Let)
    value = site.stmt.value
    if isinstance(value, n.BinOp) and value.op is n.BinOpKind.ADD:
        if mentions(value.rhs, frozenset(lets)):
            return False
        value = value.lhs
    call = _call(value, func)
    along = _along_rows(call) if call is not None else None
    return along is not None and along.id == tile.id
