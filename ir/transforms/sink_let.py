"""sink_let: a `let` moved down its block toward its first use, as far as the program's meaning allows.

A value computed early is live (held in registers) over everything between its `let` and its first use. Inside a
consumer's k loop, `let cn: f32[BK] = csq[s]` written before `let dot = mma(..)` keeps BK / 4 more registers live
across the product than the same load written after it; with a held operand on top that is the difference between
spilling and not (tests/agents/test_reachability.py). Moving the let down is an instruction-order choice the search
can make; every order it may produce means the same thing.

Precondition, for `let v = e` in a block: the statement right after it neither reads `v`, nor writes a name `e`
reads (an assignment, a store or copy into it), nor synchronizes (a barrier wait, arrive or sync: past a release
the stage `e` reads may be refilled, past a wait it may hold the next phase's data), nor is a loop. Effect: the
let moves past every such statement, up to the first that is not. None when it cannot move at all.

`sink_past_mma` applies it to every let, other than a product, that can move past an mma of its block (a value
computed before the product and first needed after it): where the product is the point of highest register pressure
(an operand held in registers beside the accumulator, `hold_operand`), nothing that merely waits across it should be
live there.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.stage_reads import reads
from cake.ir.transforms.sites import main_launch
from cake.ir.visit import identifiers, walk_body, with_role

SYNCHRONIZING = (n.Wait, n.Arrive, n.ExpectTx, n.Sync, n.NamedBarrierSync, n.MmaAsync)


def _blocks_movement(stmt: n.Stmt, let: n.Let, inputs: set[str]) -> bool:
    if isinstance(stmt, (n.For, *SYNCHRONIZING)) or reads(stmt, let.name):
        return True
    if isinstance(stmt, (n.Let, n.Assign)) and stmt.name in inputs:  # a shadowing let is refused by the checker
        return True
    return isinstance(stmt, (n.Copy, n.Store, n.Atomic)) and analysis.ref_name(stmt.dest) in inputs


def _moves(block: tuple[n.Stmt, ...], at: int) -> int:
    """How many statements the let at `block[at]` can move past."""
    let = block[at]
    assert isinstance(let, n.Let)
    inputs = set(identifiers(let.value))
    steps = 0
    for stmt in block[at + 1:]:
        if _blocks_movement(stmt, let, inputs):
            break
        steps += 1
    return steps


def _blocks(body: tuple[n.Stmt, ...]) -> list[tuple[n.Stmt, ...]]:
    return [body, *(site.stmt.body for site in walk_body(body) if isinstance(site.stmt, n.For))]


def sinkable(kernel: n.Kernel) -> tuple[str, ...]:
    """The lets of the main launch that `sink_let` can move, in program order."""
    launch = main_launch(kernel)
    return tuple(stmt.name for role in launch.roles for block in _blocks(role.body)
                 for at, stmt in enumerate(block) if isinstance(stmt, n.Let) and _moves(block, at))


def sink_let(kernel: n.Kernel, name: str | None = None) -> n.Kernel | None:
    """`kernel` with the let `name` (default: the first that can move) moved as far down its block as allowed."""
    launch = main_launch(kernel)
    for role in launch.roles:
        for block in _blocks(role.body):
            for at, stmt in enumerate(block):
                if not isinstance(stmt, n.Let) or (name is not None and stmt.name != name):
                    continue
                if _moves(block, at):
                    return _moved(kernel, launch, role, block, at)
    return None


def _moved(kernel: n.Kernel, launch: n.Launch, role: n.Role, block: tuple[n.Stmt, ...], at: int) -> n.Kernel:
    """`kernel` with the let at `block[at]` (a block of `role`) moved as far down the block as allowed."""
    steps = _moves(block, at)
    moved = (*block[:at], *block[at + 1:at + 1 + steps], block[at], *block[at + 1 + steps:])
    return with_role(kernel, launch, role, replace(role, body=_replace_block(role.body, block, moved)))


def _past_mma(block: tuple[n.Stmt, ...]) -> int | None:
    """The index of the first let of `block` that `sink_let` would carry past an mma let of the same block. Products
    themselves stay where they are: two independent products would otherwise trade places forever."""
    for at, stmt in enumerate(block):
        if not isinstance(stmt, n.Let) or isinstance(stmt.value, n.Mma):
            continue
        passed = block[at + 1:at + 1 + _moves(block, at)]
        if any(isinstance(p, n.Let) and isinstance(p.value, n.Mma) for p in passed):
            return at
    return None


def sink_past_mma_naming(kernel: n.Kernel) -> tuple[n.Kernel, tuple[str, ...]]:
    """`kernel` with every let `sink_past_mma` moves moved (itself when none), and those lets in move order."""
    out, moved = kernel, list[str]()
    statements = sum(1 for role in main_launch(kernel).roles for _ in walk_body(role.body))
    for _ in range(statements * statements + 1):  # each step carries one let past at least one mma, never back
        launch = main_launch(out)
        site = next(((role, block, at) for role in launch.roles for block in _blocks(role.body)
                     if (at := _past_mma(block)) is not None), None)
        if site is None:
            return out, tuple(moved)
        role, block, at = site
        let = block[at]
        assert isinstance(let, n.Let)
        moved.append(let.name)
        out = _moved(out, launch, role, block, at)
    raise AssertionError("sink_past_mma did not reach a fixpoint within (statements)^2 moves")


def sink_past_mma(kernel: n.Kernel) -> n.Kernel | None:
    """`kernel` with every let of the main launch that can move past an mma of its block moved down (`sink_let`),
    until none can; None when none could."""
    out, moved = sink_past_mma_naming(kernel)
    return out if moved else None


def lets_past_mma(kernel: n.Kernel) -> tuple[str, ...]:
    """The lets `sink_past_mma` moves, in the order it moves them."""
    return sink_past_mma_naming(kernel)[1]


def _replace_block(body: tuple[n.Stmt, ...], old: tuple[n.Stmt, ...], new: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    if body is old:
        return new
    return tuple(replace(s, body=_replace_block(s.body, old, new)) if isinstance(s, n.For) else s for s in body)
