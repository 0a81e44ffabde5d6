"""registerize_smem: copies into shared memory become register tiles, for backends that own shared memory.

Triton decides where tiles live and pipelines loads itself, so for it the schedule's

    copy c[b, k*BK : +BK, :] -> cs[s] via load masked
    ... mma(xt, cs[s].T) ...

means `let cs: T[BK, D] = load c[b, k*BK : +BK, :] masked` followed by reads of `cs`. The rewrite applies
to a buffer only when that meaning is exact: every write to it is a `via load` or `via cp_async` copy with
no barrier to signal, and every access names the same stage expression (the stage is a pipelining hint,
not a second buffer). Buffers fed by TMA, signalling a barrier, or read at another stage than written
are left alone: the backend-capability check refuses those with a located diagnostic.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from cake.ir.nodes import (
    Assign,
    Copy,
    CopyKind,
    For,
    Index,
    Kernel,
    Launch,
    Let,
    Load,
    Name,
    NewAxis,
    Slice,
    SmemDecl,
    Stmt,
)
from cake.ir.visit import children, transform, walk
from cake.lowering.pipeline import LowerContext

_REGISTER_COPIES = (CopyKind.LOAD, CopyKind.CP_ASYNC)


def registerize_smem(kernel: Kernel, ctx: LowerContext) -> Kernel:
    return replace(kernel, launches=tuple(_launch(launch) for launch in kernel.launches))


def _launch(launch: Launch) -> Launch:
    movable = {s.name: s for s in launch.smem if _movable(s, launch)}
    if not movable:
        return launch
    roles = tuple(replace(role, body=_body(role.body, movable, set())) for role in launch.roles)
    return replace(launch, smem=tuple(s for s in launch.smem if s.name not in movable), roles=roles)


def _movable(buffer: SmemDecl, launch: Launch) -> bool:
    written = False
    for node in walk(launch.roles):
        dest = getattr(node, "dest", None)
        if dest is None or _buffer_name(dest) != buffer.name:
            continue
        if not isinstance(node, Copy) or node.kind not in _REGISTER_COPIES or node.signals is not None:
            return False  # fed by TMA, signalling a barrier, or written by an mma: it stays in smem
        written = True
    # One stage expression throughout (or none at all): then the buffer is one tile per iteration.
    stages = set(_accesses(launch.roles, buffer.name))
    return written and len(stages) <= 1


def _body(body: tuple[Stmt, ...], movable: dict[str, SmemDecl], declared: set[str]) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    scope = set(declared)
    for stmt in body:
        if isinstance(stmt, Copy) and _buffer_name(stmt.dest) in movable and stmt.kind in _REGISTER_COPIES:
            name = _buffer_name(stmt.dest)
            assert name is not None
            load = Load(stmt.source, stmt.masked, None, span=stmt.span)
            if name in scope:
                out.append(Assign(name, load, span=stmt.span))
            else:
                out.append(Let(name, movable[name].type, load, span=stmt.span))
                scope.add(name)
            continue
        if isinstance(stmt, For):
            stmt = replace(stmt, body=_body(stmt.body, movable, scope))
        out.append(_reads(stmt, movable))
    return tuple(out)


def _reads(stmt: Stmt, movable: dict[str, SmemDecl]) -> Stmt:
    if isinstance(stmt, For):  # its body is already rewritten; only the bounds remain
        return replace(stmt, start=_reads_expr(stmt.start, movable), stop=_reads_expr(stmt.stop, movable))
    return _reads_expr(stmt, movable)  # type: ignore[no-any-return]


def _reads_expr(node: Any, movable: dict[str, SmemDecl]) -> Any:
    def visit(item: Any) -> Any:
        if isinstance(item, Index) and isinstance(item.base, Name) and item.base.id in movable:
            return Name(item.base.id, span=item.span)
        return item

    return transform(node, visit)


def _buffer_name(ref: Any) -> str | None:
    if isinstance(ref, Name):
        return ref.id
    if isinstance(ref, Index) and isinstance(ref.base, Name):
        return ref.base.id
    return None


def _accesses(node: Any, name: str) -> Iterator[str]:
    """How each access to buffer `name` selects it: the stage expression's structure, `<whole>` for a
    bare name, `<subtile>` for anything that is not one stage."""
    if isinstance(node, Index) and isinstance(node.base, Name) and node.base.id == name:
        item = node.items[0] if len(node.items) == 1 else None
        yield "<subtile>" if item is None or isinstance(item, (Slice, NewAxis)) else repr(item)
        for child in node.items:
            yield from _accesses(child, name)
        return
    if isinstance(node, Name) and node.id == name:
        yield "<whole>"
        return
    for child in children(node):
        yield from _accesses(child, name)
