"""Facts about one role body that codegen needs before it emits the first statement.

* ranks of let-bound tiles (read from the type table, `cake.ir.typing`);
* which names are reassigned (loop-carried: they must live in registers, not stay symbolic);
* which names feed an mma as operands (global loads among them are staged through shared memory);
* for every 1-D tile, the layout family it follows: the rows of an mma result (ROW), its columns (COL),
  or neither (THREAD: spread over the role's threads). A vector's family is decided by how it is combined:
  a row reduction of an mma result is ROW, `v[None, :]` next to an mma result makes v COL, and
  elementwise statements propagate a family between their 1-D operands (`besti = where(m < best, i, besti)`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake.ir import analysis as an
from cake.ir.builtins import BUILTINS, BuiltinKind
from cake.ir.nodes import (
    Assign,
    BinOp,
    Call,
    Expr,
    Index,
    Launch,
    Let,
    Load,
    Mma,
    MmaAsync,
    Name,
    NewAxis,
    Slice,
    Stmt,
    Store,
    Transpose,
    UnaryOp,
)
from cake.ir.typing import Typing
from cake.lowering.cuda.errors import Code, Unlowerable
from cake.lowering.cuda.values import Fam


@dataclass(slots=True)
class RoleFacts:
    ranks: dict[str, int] = field(default_factory=dict)
    assigned: set[str] = field(default_factory=set)
    mma_operands: set[str] = field(default_factory=set)
    fraggy: set[str] = field(default_factory=set)
    fams: dict[str, Fam] = field(default_factory=dict)
    conflicts: dict[str, set[Fam]] = field(default_factory=dict)
    anchor: Mma | Load | None = None  # the first mma (or TMEM load) of the role: its layout rules vectors


class _Classes:
    """Union-find over names, with the family hints each class collected."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.hints: dict[str, set[Fam]] = {}

    def find(self, a: str) -> str:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
            self.hints.setdefault(ra, set()).update(self.hints.pop(rb, set()))

    def hint(self, a: str, fam: Fam) -> None:
        self.hints.setdefault(self.find(a), set()).add(fam)


def _kind(func: str) -> BuiltinKind | None:
    row = BUILTINS.get(func)
    return None if row is None else row.kind


def _elementwise(func: str) -> bool:
    """Elementwise builtins relate their vector operands' layouts; reductions, scans (through shared memory)
    and index builders do not."""
    return _kind(func) is BuiltinKind.ELEMENTWISE


def _axis(call: Call) -> int | None:
    for kw in call.kwargs:
        if kw.name == "axis":
            try:
                return an.value(kw.value, an.Env())
            except an.Unbound:
                return None
    return None


class RoleInference:
    def __init__(self, launch: Launch, body: tuple[Stmt, ...], typing: Typing):
        self.launch = launch
        self.typing = typing
        self.tmem = {t.name for t in launch.tmem}
        self.facts = RoleFacts()
        self.classes = _Classes()
        self.body = body

    def run(self) -> RoleFacts:
        sites = list(an.walk_body(self.body))
        for _ in range(2):  # ranks and fragginess of later lets can depend on earlier ones
            for site in sites:
                stmt = site.stmt
                if isinstance(stmt, Let):
                    self.facts.ranks[stmt.name] = self.rank(stmt)
                    if self.is_fraggy(stmt.value):
                        self.facts.fraggy.add(stmt.name)
                elif isinstance(stmt, Assign):
                    self.facts.assigned.add(stmt.name)
                    if self.is_fraggy(stmt.value):
                        self.facts.fraggy.add(stmt.name)
        for site in sites:
            stmt = site.stmt
            for expr in an.stmt_exprs(stmt):
                for sub in an.walk_expr(expr):
                    if isinstance(sub, Mma):
                        self._operands(sub.a, sub.b)
                        if self.facts.anchor is None:
                            self.facts.anchor = sub
                    elif isinstance(sub, Load) and self._is_tmem(sub.source) and self.facts.anchor is None:
                        self.facts.anchor = sub
            if isinstance(stmt, MmaAsync):
                self._operands(stmt.a, stmt.b)
            if isinstance(stmt, (Let, Assign)):
                target = stmt.name
                self._relate(target, stmt.value)
            if isinstance(stmt, (Let, Assign, Store)):
                self._broadcast_hints(stmt.value)
        for name, rank in self.facts.ranks.items():
            if rank != 1:
                continue
            hints = set(self.classes.hints.get(self.classes.find(name), set()))
            if len(hints) > 1:
                hints.discard(Fam.THREAD)  # a shared-memory row can be read along either axis
            if len(hints) > 1:
                self.facts.conflicts[name] = hints
            elif hints:
                self.facts.fams[name] = next(iter(hints))
        return self.facts

    # ----------------------------------------------------------------------------------------- helpers

    def _is_tmem(self, source: Expr) -> bool:
        return an.ref_name(source) in self.tmem

    def _operands(self, *exprs: Expr) -> None:
        for e in exprs:
            base = e.operand if isinstance(e, Transpose) else e
            if isinstance(base, Name):
                self.facts.mma_operands.add(base.id)

    def rank(self, node: Expr | Let) -> int:
        rank = self.typing.rank(node)
        if rank is None:
            raise Unlowerable(Code.UNSUPPORTED, "an expression without a type (`cake check` reports why)")
        return rank

    def is_fraggy(self, expr: Expr | None) -> bool:
        for sub in an.walk_expr(expr):
            if isinstance(sub, Mma):
                return True
            if isinstance(sub, Load) and self._is_tmem(sub.source):
                return True
            if isinstance(sub, Name) and sub.id in self.facts.fraggy:
                return True
        return False

    def _relate(self, target: str, value: Expr) -> None:
        if self.facts.ranks.get(target, self.rank(value)) != 1:
            return
        self.classes.find(target)
        for name in self._direct_vectors(value):
            self.classes.union(target, name)
        for call in self._top_reductions(value):
            arg = call.args[0] if call.args else None
            if self.rank(arg) == 2:
                axis = _axis(call)
                if self.is_fraggy(arg):
                    self.classes.hint(target, Fam.ROW if axis in (1, -1) else Fam.COL)
                else:
                    self.classes.hint(target, Fam.THREAD)

    def _direct_vectors(self, expr: Expr) -> list[str]:
        """Rank-1 names combined elementwise at the top level of `expr` (not broadcast, not reduced)."""
        out: list[str] = []
        if isinstance(expr, Name) and self.facts.ranks.get(expr.id) == 1:
            out.append(expr.id)
        elif isinstance(expr, BinOp):
            out += self._direct_vectors(expr.lhs) + self._direct_vectors(expr.rhs)
        elif isinstance(expr, UnaryOp):
            out += self._direct_vectors(expr.operand)
        elif isinstance(expr, Call) and _elementwise(expr.func):
            for a in expr.args:
                out += self._direct_vectors(a)
        return out

    def _top_reductions(self, expr: Expr) -> list[Call]:
        out: list[Call] = []
        if isinstance(expr, Call) and _kind(expr.func) is BuiltinKind.REDUCTION:
            out.append(expr)
        elif isinstance(expr, BinOp):
            out += self._top_reductions(expr.lhs) + self._top_reductions(expr.rhs)
        elif isinstance(expr, UnaryOp):
            out += self._top_reductions(expr.operand)
        elif isinstance(expr, Call):
            for a in expr.args:
                out += self._top_reductions(a)
        return out

    def _broadcast_hints(self, expr: Expr) -> None:
        if not self.is_fraggy(expr):
            return
        for sub in an.walk_expr(expr):
            if isinstance(sub, Index) and isinstance(sub.base, Name) and len(sub.items) == 2:
                first, second = sub.items
                if isinstance(first, NewAxis) and isinstance(second, Slice):
                    self.classes.hint(sub.base.id, Fam.COL)
                elif isinstance(first, Slice) and isinstance(second, NewAxis):
                    self.classes.hint(sub.base.id, Fam.ROW)
