"""One pair of reductions for `min(x, axis=a)` and `argmin(x, axis=a)` of the same tile (likewise `max`/`argmax`).

A schedule that keeps a running argmin writes both (`m = min(dist, axis=1)`, `i = argmin(dist, axis=1)`).
The argmin already computes the minimum on its way to the index (calls.py `_first_extreme`: the value by
minNum, then the first lane equal to it), so the `min` of the same tile reuses that value instead of reducing
the tile again. The pairing is decided per block, before its statements are emitted:

* both calls are in statements of the same block (not in a nested loop: a value computed in an outer block
  must not be reused by an inner one that may see a new `x` on its next iteration), and
* their operand is the same plain name with the same `axis=`, and that name is never rebound in the block
  or the loops inside it (no `Assign` to it, a single `let`): the second call must see the first one's value.

The first of the pair to be emitted emits the reductions and records both results; the second reuses them.
NaN handling is the argmin's (NaN never the extreme, see calls.py), so the fused `min` of a row whose every
element is NaN is the identity (+inf), as the CUDA backend's `min` gives, where Triton's unfused `tl.min`
would give NaN; for every other row the two agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from cake.ir import nodes as n
from cake.ir.visit import stmt_exprs, walk_expr, walk_stmts
from cake.lowering.triton.values import Val

# value reduction -> its index reduction (the pair one fused reduction computes)
FAMILIES: dict[str, str] = {"min": "argmin", "max": "argmax"}
_FAMILY_OF: dict[str, str] = {**{v: k for k, v in FAMILIES.items()}, **{k: k for k in FAMILIES}}

# (family "min"|"max", operand name, axis keyword as written or None)
Key = tuple[str, str, int | None]


def key_of(call: n.Call) -> Key | None:
    """The pairing key of an extreme reduction call over a plain name; None for anything else."""
    family = _FAMILY_OF.get(call.func)
    if family is None or len(call.args) != 1 or not isinstance(call.args[0], n.Name):
        return None
    axis: int | None = None
    for kw in call.kwargs:
        if kw.name != "axis":
            return None
        if isinstance(kw.value, n.IntLit):
            axis = kw.value.value
        elif (isinstance(kw.value, n.UnaryOp) and kw.value.op is n.UnaryOpKind.NEG
              and isinstance(kw.value.operand, n.IntLit)):
            axis = -kw.value.operand.value
        else:
            return None
    return family, call.args[0].id, axis


def paired(body: tuple[n.Stmt, ...]) -> frozenset[Key]:
    """The keys under which both the value and the index reduction occur among `body`'s own statements."""
    seen: dict[Key, set[str]] = {}
    lets = [s.name for s in walk_stmts(body) if isinstance(s, n.Let)]
    rebound = {s.name for s in walk_stmts(body) if isinstance(s, n.Assign)}
    rebound |= {name for name in lets if lets.count(name) > 1}
    for stmt in body:
        if isinstance(stmt, n.For):
            continue  # its body is a block of its own
        for expr in stmt_exprs(stmt):
            for node in walk_expr(expr):
                if isinstance(node, n.Call) and (key := key_of(node)) is not None:
                    seen.setdefault(key, set()).add(node.func)
    return frozenset(key for key, funcs in seen.items()
                     if len(funcs) == 2 and key[1] not in rebound)


@dataclass(frozen=True, slots=True)
class Fused:
    value: Val
    index: Val


@dataclass
class ExtremePairs:
    """The pairs of the block being emitted and the fused results emitted so far in it."""

    keys: frozenset[Key] = frozenset()
    done: dict[Key, Fused] = field(default_factory=dict)

    @contextmanager
    def block(self, body: tuple[n.Stmt, ...]) -> Iterator[None]:
        """Pairs of `body` for as long as it is being emitted (a nested block starts with none of its parent's)."""
        saved = (self.keys, self.done)
        self.keys, self.done = paired(body), {}
        try:
            yield
        finally:
            self.keys, self.done = saved

    def key(self, call: n.Call) -> Key | None:
        key = key_of(call)
        return key if key in self.keys else None
