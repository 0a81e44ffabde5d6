"""The rewrite engine: one way to walk, transform and substitute over the frozen IR nodes.

Nodes are frozen dataclasses; a node's children are its fields other than `span` (tuples of nodes included).
Every traversal in CAKE goes through these functions, so a pass states only the nodes it changes:

| function | what it does |
|---|---|
| `walk(node)` | every node under `node` (itself included), depth first, pre-order |
| `transform(node, fn)` | rebuild bottom-up: children first, then `fn` on the rebuilt node |
| `rewrite(node, fn)` | rebuild top-down: where `fn` returns a node it replaces the subtree, elsewhere recurse |
| `substitute(node, {name: expr})` | every `Name(name)` replaced (parameters, loop variables, replicas) |
| `mentions(node, names)` | whether a `Name` among `names` occurs under `node` |
| `fresh(base, taken)` | a name not in `taken` (`base`, `base2`, ...) |
| `identifiers(node)` | every identifier-like string under `node` (names, declarations, loop variables) |
| `walk_body(body)` | statements in program order with their path and enclosing loops (`StmtSite`) |
| `walk_stmts(body)`, `map_stmts(body, fn)` | statements only; map keeps statement identity for `fn` |
| `walk_expr(expr)`, `stmt_exprs(stmt)` | sub-expressions; the expressions one statement evaluates |
| `with_launch`, `with_role` | a kernel with one launch / role (by identity) replaced |

Every rebuild keeps spans and returns the very same object when nothing under it changed, so `is` tells a
pass whether it did anything (`Kernel -> Kernel | None`).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, TypeVar

from cake.ir import nodes as n

N = TypeVar("N")
Path = tuple[int, ...]


def _is_node(node: object) -> bool:
    return is_dataclass(node) and not isinstance(node, type)


def children(node: Any) -> Iterator[Any]:
    """The direct children of `node`: its fields other than `span`, or a tuple's items."""
    if isinstance(node, tuple):
        yield from node
    elif _is_node(node):
        for f in fields(node):
            if f.name != "span":
                yield getattr(node, f.name)


def walk(node: Any) -> Iterator[Any]:
    """Every node under `node` (itself included), depth first; spans are not visited."""
    yield node
    for child in children(node):
        yield from walk(child)


def _rebuild(node: N, visit: Callable[[Any], Any]) -> N:
    """`node` with `visit` applied to each child; the same object when no child changed."""
    if isinstance(node, tuple):
        items = tuple(visit(item) for item in node)
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items  # type: ignore[return-value]
    if not _is_node(node):
        return node
    changes: dict[str, Any] = {}
    for f in fields(node):  # type: ignore[arg-type]
        if f.name == "span":
            continue
        old = getattr(node, f.name)
        new = visit(old)
        if new is not old:
            changes[f.name] = new
    return replace(node, **changes) if changes else node  # type: ignore[type-var]


def transform(node: N, fn: Callable[[Any], Any]) -> N:
    """Rebuild `node` bottom-up: every child first, then `fn` on the rebuilt node. Spans are kept."""
    rebuilt = _rebuild(node, lambda child: transform(child, fn))
    return fn(rebuilt) if _is_node(rebuilt) else rebuilt  # type: ignore[no-any-return]


def rewrite(node: N, fn: Callable[[Any], Any | None]) -> N:
    """Rebuild `node` top-down: where `fn(x)` returns a node, it replaces `x` (not revisited); where it
    returns None, `x`'s children are rewritten."""
    hit = fn(node)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    return _rebuild(node, lambda child: rewrite(child, fn))


def substitute(node: N, mapping: Mapping[str, n.Expr]) -> N:
    """Replace every `Name(x)` under `node` by `mapping[x]`."""
    if not mapping:
        return node
    return rewrite(node, lambda x: mapping.get(x.id, x) if isinstance(x, n.Name) else None)


def substitute_body(body: tuple[n.Stmt, ...], mapping: Mapping[str, n.Expr]) -> tuple[n.Stmt, ...]:
    return substitute(body, mapping)


def mentions(node: object, names: set[str] | frozenset[str]) -> bool:
    """Whether `node` (a node, or a tuple of them) refers to any of `names`."""
    return any(isinstance(x, n.Name) and x.id in names for x in walk(node))


def fresh(base: str, taken: set[str] | frozenset[str]) -> str:
    """`base`, or `base2`, `base3`, ... whichever is not taken."""
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name


def identifiers(node: Any) -> Iterator[str]:
    """Every identifier-like string under `node` (names, declarations, loop variables)."""
    for x in walk(node):
        if isinstance(x, str) and x.isidentifier():
            yield x


# ------------------------------------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class StmtSite:
    """A statement with where it sits: its path in the role body and its enclosing loops (outermost first).
    The path has one index per nesting level, so `path[:-1]` is the path of the innermost enclosing loop."""

    path: Path
    stmt: n.Stmt
    loops: tuple[n.For, ...]


def walk_body(body: tuple[n.Stmt, ...], prefix: Path = (), loops: tuple[n.For, ...] = ()) -> Iterator[StmtSite]:
    """Every statement in program order (a loop, then its body)."""
    for i, stmt in enumerate(body):
        path = (*prefix, i)
        yield StmtSite(path, stmt, loops)
        if isinstance(stmt, n.For):
            yield from walk_body(stmt.body, path, (*loops, stmt))


def launch_sites(launch: n.Launch) -> Iterator[tuple[n.Role, StmtSite]]:
    """Every statement of every role of `launch`, with its role, in program order role by role."""
    for role in launch.roles:
        for site in walk_body(role.body):
            yield role, site


def walk_stmts(body: tuple[n.Stmt, ...]) -> Iterator[n.Stmt]:
    """Every statement of `body`, loops before their bodies (`walk_body`'s order)."""
    return (site.stmt for site in walk_body(body))


def map_stmts(body: tuple[n.Stmt, ...], fn: Callable[[n.Stmt], n.Stmt]) -> tuple[n.Stmt, ...]:
    """`fn` applied to every statement, innermost first (a loop gets its rebuilt body, other statements
    arrive as the original objects, so `fn` can name its target by identity)."""
    out = []
    for stmt in body:
        if isinstance(stmt, n.For):
            stmt = replace(stmt, body=map_stmts(stmt.body, fn))
        out.append(fn(stmt))
    return tuple(out)


_EXPR_PARTS = (*typing.get_args(n.Expr), n.Slice, n.NewAxis)


def walk_expr(expr: n.Expr | n.Slice | n.NewAxis | None) -> Iterator[n.Expr]:
    """`expr` and every sub-expression, pre-order (slices and new axes contribute their parts)."""
    if expr is None or isinstance(expr, n.NewAxis):
        return
    if isinstance(expr, n.Slice):
        yield from walk_expr(expr.start)
        yield from walk_expr(expr.size)
        return
    yield expr
    for child in children(expr):
        for item in child if isinstance(child, tuple) else (child,):
            item = item.value if isinstance(item, n.Keyword) else item
            if isinstance(item, _EXPR_PARTS):
                yield from walk_expr(item)


def stmt_exprs(stmt: n.Stmt) -> tuple[n.Expr, ...]:
    """The expressions a statement evaluates (not its nested loop body)."""
    if isinstance(stmt, (n.Let, n.Assign)):
        return (stmt.value,)
    if isinstance(stmt, n.Copy):
        return tuple(e for e in (stmt.source, stmt.dest, stmt.signals) if e is not None)
    if isinstance(stmt, (n.Store, n.Atomic)):
        return (stmt.value, stmt.dest)
    if isinstance(stmt, n.MmaAsync):
        return tuple(e for e in (stmt.a, stmt.b, stmt.dest, stmt.signals) if e is not None)
    if isinstance(stmt, n.For):
        exprs: list[n.Expr] = [stmt.start, stmt.stop]
        if stmt.pipeline is not None:
            exprs.append(stmt.pipeline.stages)
        if stmt.expect is not None:
            exprs.append(stmt.expect)
        return tuple(exprs)
    if isinstance(stmt, n.Wait):
        return tuple(e for e in (stmt.barrier, stmt.phase) if e is not None)
    if isinstance(stmt, n.Arrive):
        return (stmt.barrier,)
    if isinstance(stmt, n.ExpectTx):
        return (stmt.barrier, stmt.bytes)
    if isinstance(stmt, n.NamedBarrierSync):
        return (stmt.barrier_id, stmt.threads)
    return ()


# ------------------------------------------------------------------------------------------- kernel edits


def with_launch(kernel: n.Kernel, launch: n.Launch, new: n.Launch) -> n.Kernel:
    """`kernel` with `launch` (by identity) replaced by `new`."""
    return replace(kernel, launches=tuple(new if lc is launch else lc for lc in kernel.launches))


def with_role(kernel: n.Kernel, launch: n.Launch, old: n.Role, new: n.Role) -> n.Kernel:
    """`kernel` with role `old` of `launch` (by identity) replaced by `new`."""
    roles = tuple(new if r is old else r for r in launch.roles)
    return with_launch(kernel, launch, replace(launch, roles=roles))
