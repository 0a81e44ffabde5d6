"""The builtin functions a schedule may call: one table, read by the checker, the lowerings and the card.

A `Call` node names its function by string; `BUILTINS[name]` says how many positional arguments it takes,
which keywords it allows and requires, and what kind of operation it is:

* elementwise — one result element per (broadcast) input element;
* reduction — collapses `axis=` (argmin/argmax give the first index of the extreme);
* scan — inclusive prefix along `axis=`, same shape;
* index — builds an index vector (`arange(n)` = 0 .. n-1, i32);
* scalar — compile-time integer arithmetic on params and dims (`cdiv`).

`sizeof(T)` and `mma(...) via FORM` are syntax (nodes SizeOf and Mma), not calls, so they are not here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cake.ir import nodes as n


class BuiltinKind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    SCAN = "scan"
    INDEX = "index"
    SCALAR = "scalar"


@dataclass(frozen=True, slots=True)
class Builtin:
    name: str
    kind: BuiltinKind
    min_args: int
    max_args: int
    doc: str
    keywords: frozenset[str] = frozenset()  # allowed
    required_keywords: frozenset[str] = frozenset()
    float_only: bool = False  # transcendental math: integer arguments are a type error, not an implicit cast

    def accepts(self, call: n.Call) -> str | None:
        """None when `call`'s arguments fit this builtin, else what is wrong, in the user's words."""
        count = len(call.args)
        if not self.min_args <= count <= self.max_args:
            want = str(self.min_args) if self.min_args == self.max_args else f"{self.min_args} to {self.max_args}"
            return f"`{self.name}` takes {want} positional argument{'s' if want != '1' else ''}, got {count}"
        given = [k.name for k in call.kwargs]
        for name in given:
            if name not in self.keywords:
                allowed = ", ".join(f"`{k}=`" for k in sorted(self.keywords)) or "no keywords"
                return f"`{self.name}` has no keyword `{name}=` (it takes {allowed})"
        if len(set(given)) != len(given):
            return f"`{self.name}` got a keyword twice"
        for name in sorted(self.required_keywords - set(given)):
            return f"`{self.name}` needs `{name}=`"
        return None


_AXIS = frozenset({"axis"})


def _table(*builtins: Builtin) -> Mapping[str, Builtin]:
    return MappingProxyType({b.name: b for b in builtins})


BUILTINS: Mapping[str, Builtin] = _table(
    *(Builtin(name, BuiltinKind.ELEMENTWISE, 1, 1, doc, float_only=True) for name, doc in (
        ("exp", "e^x"), ("exp2", "2^x"), ("log", "natural logarithm"), ("sqrt", "square root"),
        ("rsqrt", "1 / sqrt(x)"))),
    Builtin("abs", BuiltinKind.ELEMENTWISE, 1, 1, "absolute value"),
    Builtin("maximum", BuiltinKind.ELEMENTWISE, 2, 2, "elementwise larger of a and b"),
    Builtin("minimum", BuiltinKind.ELEMENTWISE, 2, 2, "elementwise smaller of a and b"),
    Builtin("where", BuiltinKind.ELEMENTWISE, 3, 3, "where(cond, a, b): a where cond holds, else b"),
    Builtin("cast", BuiltinKind.ELEMENTWISE, 2, 2, "cast(e, DTYPE): convert the element type"),
    Builtin("sum", BuiltinKind.REDUCTION, 1, 1, "sum along axis", _AXIS, _AXIS),
    Builtin("max", BuiltinKind.REDUCTION, 1, 1, "maximum along axis", _AXIS, _AXIS),
    Builtin("min", BuiltinKind.REDUCTION, 1, 1, "minimum along axis", _AXIS, _AXIS),
    Builtin("argmax", BuiltinKind.REDUCTION, 1, 1, "first index of the maximum along axis (i32)", _AXIS, _AXIS),
    Builtin("argmin", BuiltinKind.REDUCTION, 1, 1, "first index of the minimum along axis (i32)", _AXIS, _AXIS),
    Builtin("cumsum", BuiltinKind.SCAN, 1, 1, "inclusive prefix sum along axis", _AXIS, _AXIS),
    Builtin("arange", BuiltinKind.INDEX, 1, 1, "arange(n): i32 vector 0 .. n-1"),
    Builtin("cdiv", BuiltinKind.SCALAR, 2, 2, "cdiv(a, b): ceiling division of integers"),
)


def builtin(name: str) -> Builtin | None:
    return BUILTINS.get(name)


def of_kind(kind: BuiltinKind) -> frozenset[str]:
    return frozenset(name for name, b in BUILTINS.items() if b.kind is kind)
