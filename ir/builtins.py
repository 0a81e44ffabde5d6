"""The builtin functions a schedule may call: one table, one row per builtin.

A `Call` node names its function by string; the row `BUILTINS[name]` holds everything about it:

* its **signature** — positional arity, allowed and required keywords, which arguments are element types;
* its **kind** — elementwise (one result element per broadcast input element), reduction (collapses
  `axis=`; argmin/argmax give the first index of the extreme), scan (inclusive prefix along `axis=`, same
  shape), index (builds index tiles: `arange`, `tril`), scalar (compile-time integer arithmetic: `cdiv`);
* its **typing rule** — `(Typer, call, argument types) -> result Type`, run by the typing pass
  (`cake.ir.typing`), which owns promotion and broadcasting and reports through the `Typer`;
* its **cost** — CUDA-core operations per element for the cost model (`special`: the transcendental unit);
* its **emitters** — each backend registers one emission rule per builtin with `register_emitters` when it
  is imported; `missing_emitters(backend)` names the rows a backend has not lowered.

`sizeof(T)` and `mma(...) via FORM` are syntax (nodes SizeOf and Mma), not calls, so they are not here.
Adding a builtin: see "Adding a builtin" in `ir/README.md`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from cake.ir import nodes as n
from cake.ir.types import INDEX, Elem, Shape, Type, Weak, shape_text


class BuiltinKind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    SCAN = "scan"
    INDEX = "index"
    SCALAR = "scalar"


class Typer(Protocol):
    """What a builtin's typing rule may ask of the typing pass (which reports under check IDs)."""

    def report(self, code: str, node: object, subject: str | None, label: str | None,
               help: str | None = None, **fields: object) -> None: ...

    def unify(self, node: object, a: Elem, b: Elem) -> Elem: ...

    def broadcast(self, node: object, shapes: tuple[Shape | None, ...]) -> Shape | None: ...

    def same_elem(self, node: object, got: Elem, want: Elem, what: str) -> None: ...

    def axis(self, call: n.Call, operand: Type) -> int | None: ...

    def keyword_scalar(self, call: n.Call, name: str, what: str) -> None: ...


TypingRule = Callable[[Typer, n.Call, list[Type]], Type]


@dataclass(frozen=True, slots=True)
class Builtin:
    name: str
    kind: BuiltinKind
    min_args: int
    max_args: int
    doc: str
    typing: TypingRule
    keywords: frozenset[str] = frozenset()  # allowed
    required_keywords: frozenset[str] = frozenset()
    elem_args: frozenset[int] = frozenset()  # positions that name an element type (`cast(e, f32)`)
    ops: float = 1.0  # CUDA-core operations per element (per source element for reductions and scans)
    special: bool = False  # runs on the special-function unit (priced at the cost model's SFU rate)

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


# --------------------------------------------------------------------------------------- typing rules

def _math(t: Typer, call: n.Call, args: list[Type]) -> Type:
    """Transcendental math: integer arguments are a type error, not an implicit cast."""
    elem = args[0].elem
    if isinstance(elem, n.DType) and not elem.is_float:
        t.same_elem(call, elem, n.DType.F32, f"the argument of `{call.func}`")
    return Type(Weak.FLOAT if elem is Weak.INT else elem, args[0].shape)


def _same(t: Typer, call: n.Call, args: list[Type]) -> Type:
    return args[0].in_registers()


def _elementwise(t: Typer, call: n.Call, args: list[Type]) -> Type:
    return Type(t.unify(call, args[0].elem, args[1].elem), t.broadcast(call, (args[0].shape, args[1].shape)))


def _where(t: Typer, call: n.Call, args: list[Type]) -> Type:
    if args[0].elem not in (n.DType.BOOL, Weak.ANY):
        t.same_elem(call.args[0], args[0].elem, n.DType.BOOL, "the condition of `where`")
    shape = t.broadcast(call, tuple(a.shape for a in args))
    return Type(t.unify(call, args[1].elem, args[2].elem), shape)


def _cast(t: Typer, call: n.Call, args: list[Type]) -> Type:
    return Type(args[1].elem, args[0].shape)


def _reduction(t: Typer, call: n.Call, args: list[Type]) -> Type:
    elem: Elem = n.DType.I32 if call.func in ("argmin", "argmax") else args[0].elem
    axis = t.axis(call, args[0])
    if axis is None or args[0].shape is None:
        return Type(elem, None)
    return Type(elem, args[0].shape[:axis] + args[0].shape[axis + 1:])


def _scan(t: Typer, call: n.Call, args: list[Type]) -> Type:
    axis = t.axis(call, args[0])
    return Type(args[0].elem, None if axis is None else args[0].shape)


def _rank_equal(t: Typer, call: n.Call, args: list[Type]) -> Type:
    """`rank_equal(k, axis=0)`: an i32 vector of k's shape; the keys are one i32 vector (what a backend can
    sort as one key with the position packed under it)."""
    keys = args[0]
    t.same_elem(call.args[0], keys.elem, n.DType.I32, "the keys of `rank_equal`")
    axis = t.axis(call, keys)
    if axis is None or keys.shape is None:
        return Type(n.DType.I32, None)
    if len(keys.shape) != 1:
        t.report("E0201", call.args[0], "the keys of `rank_equal`", f"shape {shape_text(keys.shape)}, expected [n]",
                 help="rank one vector of keys at a time (`k[r, :]` is a row of a rank-2 tile)",
                 what="the keys of `rank_equal`", got=shape_text(keys.shape), expected="[n]")
        return Type(n.DType.I32, None)
    return Type(n.DType.I32, keys.shape)


def _length(t: Typer, call: n.Call, arg: Type) -> bool:
    """The length argument is a scalar; else reported (and the result's shape is unknown, so it reports once)."""
    if arg.shape:
        what = f"{'an' if call.func[0] in 'aeiou' else 'a'} {call.func} length"
        t.report("E0201", call.args[0], what, "a tile, expected a scalar",
                 what=what, expected="[]", got=shape_text(arg.shape))
        return False
    return True


def _arange(t: Typer, call: n.Call, args: list[Type]) -> Type:
    return Type(n.DType.I32, (call.args[0],) if _length(t, call, args[0]) else None)


def _tril(t: Typer, call: n.Call, args: list[Type]) -> Type:
    scalar = _length(t, call, args[0])
    t.keyword_scalar(call, "diagonal", "a tril diagonal")
    return Type(n.DType.BOOL, (call.args[0], call.args[0]) if scalar else None)


def _scalar(t: Typer, call: n.Call, args: list[Type]) -> Type:
    return INDEX


_AXIS = frozenset({"axis"})


def _table(*builtins: Builtin) -> Mapping[str, Builtin]:
    return MappingProxyType({b.name: b for b in builtins})


BUILTINS: Mapping[str, Builtin] = _table(
    *(Builtin(name, BuiltinKind.ELEMENTWISE, 1, 1, doc, _math, special=True) for name, doc in (
        ("exp", "e^x"), ("exp2", "2^x"), ("log", "natural logarithm"), ("sqrt", "square root"),
        ("rsqrt", "1 / sqrt(x)"))),
    Builtin("abs", BuiltinKind.ELEMENTWISE, 1, 1, "absolute value", _same),
    Builtin("maximum", BuiltinKind.ELEMENTWISE, 2, 2, "elementwise larger of a and b", _elementwise),
    Builtin("minimum", BuiltinKind.ELEMENTWISE, 2, 2, "elementwise smaller of a and b", _elementwise),
    Builtin("where", BuiltinKind.ELEMENTWISE, 3, 3, "where(cond, a, b): a where cond holds, else b", _where),
    Builtin("cast", BuiltinKind.ELEMENTWISE, 2, 2, "cast(e, DTYPE): convert the element type", _cast,
            elem_args=frozenset({1})),
    Builtin("sum", BuiltinKind.REDUCTION, 1, 1, "sum along axis", _reduction, _AXIS, _AXIS),
    Builtin("max", BuiltinKind.REDUCTION, 1, 1, "maximum along axis", _reduction, _AXIS, _AXIS),
    Builtin("min", BuiltinKind.REDUCTION, 1, 1, "minimum along axis", _reduction, _AXIS, _AXIS),
    Builtin("argmax", BuiltinKind.REDUCTION, 1, 1, "first index of the maximum along axis (i32)", _reduction,
            _AXIS, _AXIS, ops=2.0),
    Builtin("argmin", BuiltinKind.REDUCTION, 1, 1, "first index of the minimum along axis (i32)", _reduction,
            _AXIS, _AXIS, ops=2.0),
    Builtin("cumsum", BuiltinKind.SCAN, 1, 1, "inclusive prefix sum along axis", _scan, _AXIS, _AXIS, ops=2.0),
    # Two bitonic sorts of the tile (~55 compare-exchange stages each at n = 1024) and one segmented scan.
    Builtin("rank_equal", BuiltinKind.SCAN, 1, 1,
            "rank_equal(k, axis=0): i32, how many earlier elements of the vector k hold the same value (a stable "
            "rank among equal keys)", _rank_equal, _AXIS, _AXIS, ops=110.0),
    Builtin("arange", BuiltinKind.INDEX, 1, 1, "arange(n): i32 vector 0 .. n-1", _arange),
    Builtin("tril", BuiltinKind.INDEX, 1, 1,
            "tril(n, diagonal=d): bool[n, n] mask, true where col <= row + d (d defaults to 0)", _tril,
            frozenset({"diagonal"})),
    Builtin("cdiv", BuiltinKind.SCALAR, 2, 2, "cdiv(a, b): ceiling division of integers", _scalar, ops=0.0),
)


def builtin(name: str) -> Builtin | None:
    return BUILTINS.get(name)


def of_kind(kind: BuiltinKind) -> frozenset[str]:
    return frozenset(name for name, b in BUILTINS.items() if b.kind is kind)


# ------------------------------------------------------------------------------------------- emitters

_EMITTERS: dict[str, dict[str, object]] = {}


def register_emitters(backend: str, rules: Mapping[str, object]) -> None:
    """A backend's emission rule per builtin (the rule's type is the backend's own); a name that is not a
    row of `BUILTINS` is a bug in that backend."""
    unknown = sorted(set(rules) - set(BUILTINS))
    if unknown:
        raise KeyError(f"backend {backend!r} registers emitters for unknown builtins: {', '.join(unknown)}")
    _EMITTERS.setdefault(backend, {}).update(rules)


def emitter(backend: str, name: str) -> object | None:
    return _EMITTERS.get(backend, {}).get(name)


def missing_emitters(backend: str, names: Iterable[str] | None = None) -> tuple[str, ...]:
    """Rows (of `names`, default all) that `backend` has registered no emission rule for."""
    have = _EMITTERS.get(backend, {})
    return tuple(sorted(name for name in (BUILTINS if names is None else names) if name not in have))
