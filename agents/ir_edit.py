"""Small rewriting helpers on typed kernels, shared by the mutation operators.

IR nodes are frozen dataclasses: every edit rebuilds the path from the root with `dataclasses.replace`.
Statement identity (`is`) is how an operator names the statement it rewrites, so helpers that map over a
body hand the original statement objects to their callback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n


def domain_values(kernel: n.Kernel, name: str) -> tuple[int, ...]:
    """The param's domain, sorted (long ranges thinned by `cake.ir.analysis`)."""
    return tuple(sorted(set(analysis.domain_values(kernel, name))))


def with_launch(kernel: n.Kernel, launch: n.Launch, new: n.Launch) -> n.Kernel:
    """`kernel` with `launch` (by identity) replaced by `new`."""
    return replace(kernel, launches=tuple(new if lc is launch else lc for lc in kernel.launches))


def with_role(kernel: n.Kernel, launch: n.Launch, old: n.Role, new: n.Role) -> n.Kernel:
    roles = tuple(new if r is old else r for r in launch.roles)
    return with_launch(kernel, launch, replace(launch, roles=roles))


def map_stmts(body: tuple[n.Stmt, ...], fn: Callable[[n.Stmt], n.Stmt]) -> tuple[n.Stmt, ...]:
    """`fn` applied to every statement, innermost first (a loop gets its rebuilt body, other statements
    arrive as the original objects)."""
    out = []
    for stmt in body:
        if isinstance(stmt, n.For):
            stmt = replace(stmt, body=map_stmts(stmt.body, fn))
        out.append(fn(stmt))
    return tuple(out)


def walk(body: tuple[n.Stmt, ...]) -> Iterator[n.Stmt]:
    """Every statement of `body`, loops before their bodies (`cake.ir.analysis.walk_body`'s order)."""
    return (site.stmt for site in analysis.walk_body(body))


def mentions(node: object, names: set[str]) -> bool:
    """Whether `node` (a node, or a tuple of them) refers to any of `names`."""
    if isinstance(node, n.Name):
        return node.id in names
    if isinstance(node, tuple):
        return any(mentions(x, names) for x in node)
    fields = getattr(node, "__dataclass_fields__", None)
    return fields is not None and any(mentions(getattr(node, f), names) for f in fields if f != "span")


def substitute(node: object, mapping: Mapping[str, n.Expr]) -> object:
    """Replace every `Name(x)` under `node` by `mapping[x]` (nodes are frozen dataclasses; rebuild)."""
    if not mapping:
        return node
    if isinstance(node, n.Name):
        return mapping.get(node.id, node)
    if isinstance(node, tuple):
        items = tuple(substitute(x, mapping) for x in node)
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    fields = getattr(node, "__dataclass_fields__", None)
    if fields is None:
        return node
    changes = {}
    for f in fields:
        if f == "span":
            continue
        old = getattr(node, f)
        new = substitute(old, mapping)
        if new is not old:
            changes[f] = new
    return replace(node, **changes) if changes else node  # type: ignore[type-var]


def substitute_body(body: tuple[n.Stmt, ...], mapping: Mapping[str, n.Expr]) -> tuple[n.Stmt, ...]:
    return tuple(substitute(s, mapping) for s in body)  # type: ignore[misc]


def fresh(base: str, taken: set[str]) -> str:
    """`base`, or `base2`, `base3`, ... whichever is not taken."""
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name


def drop_unused_params(kernel: n.Kernel) -> n.Kernel:
    """`kernel` without the params nothing refers to any more (a param that sizes nothing would only make
    the search propose the same schedule under other names)."""
    body = (kernel.launches, kernel.tensors, kernel.scratch)
    return replace(kernel, params=tuple(p for p in kernel.params if mentions(body, {p.name})))
