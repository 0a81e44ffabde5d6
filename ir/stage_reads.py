"""How a role reads a shared buffer's stage through a `let`, and which barrier hands the stage back to its producer.

`let t: T[M, K] = xs[w]` binds a stage of a shared buffer to a register tile. Where every use of `t` is a wgmma's A
operand, the CUDA backend reads the stage once, at the let, into registers (a *held* operand: the
`hold_operand` pass writes such lets); any other such let it reads where it is used. Whether the stage may be
released (`arrive E[i]`, E the barrier its producer waits on before each copy into it) before those uses depends on
which of the two it is: the pass, the cost model, the backend and check E0616 ask these questions here.
"""

from __future__ import annotations

from cake.ir import nodes as n
from cake.ir.analysis import ref_name
from cake.ir.visit import identifiers, stmt_exprs, walk_body, walk_expr

from cake.arch import MmaFamily

WGMMA_PREFIX = f"{MmaFamily.WGMMA.value}."


def read_only_as_wgmma_a(body: tuple[n.Stmt, ...], name: str) -> bool:
    """Whether every read of `name` in `body` is the A operand of an mma committed to wgmma (at least one)."""
    uses = a_uses = 0
    for site in walk_body(body):
        for expr in stmt_exprs(site.stmt):
            for e in walk_expr(expr):
                if isinstance(e, n.Name) and e.id == name:
                    uses += 1
                if (isinstance(e, n.Mma) and isinstance(e.a, n.Name) and e.a.id == name
                        and e.form.startswith(WGMMA_PREFIX)):
                    a_uses += 1
    return a_uses > 0 and uses == a_uses


def held_operands(launch: n.Launch) -> frozenset[str]:
    """The lets of each role of `launch` that bind a stage and are read only as a wgmma's A operand."""
    return frozenset(site.stmt.name for role in launch.roles for site in walk_body(role.body)
                     if isinstance(site.stmt, n.Let) and stage_buffer(launch, site.stmt.value) is not None
                     and read_only_as_wgmma_a(role.body, site.stmt.name))


def stage_buffer(launch: n.Launch, expr: n.Expr) -> n.SmemDecl | None:
    """The shared buffer `expr` is a bare stage of (`xs[w]`, `xs`), or None."""
    if not isinstance(expr, (n.Name, n.Index)):
        return None
    name = ref_name(expr)
    return next((b for b in launch.smem if b.name == name), None)


def freeing_barrier(launch: n.Launch, buffer: str) -> str | None:
    """The barrier a role waits on right before copying into `buffer` in the same block (the one that frees it for
    the copy), or None."""
    for role in launch.roles:
        blocks = [role.body, *(site.stmt.body for site in walk_body(role.body) if isinstance(site.stmt, n.For))]
        for block in blocks:
            last_wait: str | None = None
            for stmt in block:
                if isinstance(stmt, n.Wait):
                    last_wait = ref_name(stmt.barrier)
                elif isinstance(stmt, n.Copy) and ref_name(stmt.dest) == buffer and last_wait is not None:
                    return last_wait
    return None


def reads(stmt: n.Stmt, name: str) -> bool:
    """Whether `stmt` itself (not a loop's body) reads `name` (a copy's destination is written, not read)."""
    exprs = (stmt.source,) if isinstance(stmt, n.Copy) else stmt_exprs(stmt)
    return any(name in identifiers(e) for e in exprs)

