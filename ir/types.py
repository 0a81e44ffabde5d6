"""The IR's types: element types, tile shapes and memory spaces, with the one promotion and broadcast rule.

A `Type` is what the typing pass (`cake.ir.typing`) records for every expression: element type, shape (a
tuple of extent expressions, `()` for a scalar) and memory space. Promotion and broadcasting are defined
here once; the checker applies them strictly (two different concrete element types are an error), the
backends apply the same lattice and add only what their target language does differently (the CUDA
backend computes 16-bit floats in f32).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from cake.ir import nodes as n


class Weak(enum.Enum):
    """Element types of untyped scalars (literals, params, dims): they adopt the other operand's type."""

    INT = "int"
    FLOAT = "float"
    ANY = "?"  # unknown after an error; compatible with everything, so one mistake reports once


Elem: TypeAlias = n.DType | n.TypeVar | Weak


class Space(enum.Enum):
    """Where a value lives."""

    REG = "registers"  # computed tiles and scalars
    SMEM = "shared memory"
    TMEM = "tensor memory"
    GLOBAL = "global memory"


Shape: TypeAlias = tuple[n.Expr, ...]


@dataclass(frozen=True, slots=True)
class Type:
    elem: Elem
    shape: Shape | None  # None: unknown (after an error); () a scalar
    space: Space = Space.REG

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def in_registers(self) -> Type:
        return Type(self.elem, self.shape)


ANY = Type(Weak.ANY, None)
INDEX = Type(Weak.INT, ())


def elem_text(elem: Elem) -> str:
    if isinstance(elem, n.DType):
        return elem.value
    if isinstance(elem, n.TypeVar):
        return elem.name
    return {Weak.INT: "integer scalar", Weak.FLOAT: "float scalar", Weak.ANY: "?"}[elem]


def shape_text(shape: Shape | None) -> str:
    from cake.ir.checks.text import expr_text

    return "?" if shape is None else "[" + ", ".join(expr_text(e) for e in shape) + "]"


def type_text(ty: Type) -> str:
    return elem_text(ty.elem) + ("" if ty.shape == () else shape_text(ty.shape))


# ------------------------------------------------------------------------------------------- promotion

_INT_RANK = {n.DType.BOOL: 0, n.DType.I32: 1, n.DType.I64: 2}


def promote(a: Elem, b: Elem) -> Elem | None:
    """The element type of arithmetic on `a` and `b`; None when neither operand's type prevails.

    Weak scalars adopt the other operand's type (an integer tile meeting a float literal becomes f32); the
    same type is kept; float beats integer; the wider integer wins; f32 beats a 16-bit float, and two
    different 16-bit floats meet in f32. A dtype variable meeting another type gives None (its binding
    decides): the checker reports that as E0103, a backend resolves it when the variable is bound.
    """
    if a is Weak.ANY or b is Weak.ANY:
        return b if a is Weak.ANY else a
    if isinstance(a, Weak) and isinstance(b, Weak):
        return Weak.FLOAT if Weak.FLOAT in (a, b) else Weak.INT
    if isinstance(a, Weak) or isinstance(b, Weak):
        weak, other = (a, b) if isinstance(a, Weak) else (b, a)
        if weak is Weak.FLOAT and isinstance(other, n.DType) and not other.is_float:
            return n.DType.F32
        return other
    if a == b:
        return a
    if not (isinstance(a, n.DType) and isinstance(b, n.DType)):
        return None
    if a.is_float and b.is_float:
        return n.DType.F32  # f32 wins; two different 16-bit floats meet in f32
    if a.is_float or b.is_float:
        return a if a.is_float else b
    return a if _INT_RANK[a] >= _INT_RANK[b] else b


# ------------------------------------------------------------------------------------------ broadcasting

X = TypeVar("X")


def broadcast(shapes: Sequence[Sequence[X]], is_one: Callable[[X], bool],
              same: Callable[[X, X], bool]) -> tuple[X, ...] | None:
    """Numpy-style (right-aligned) broadcasting over any kind of extent (IR expressions, integers, a
    backend's axes); the first extent that is not one wins. None when two such extents differ."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[X] = []
    for pos in range(rank):
        extents = [s[len(s) - rank + pos] for s in shapes if len(s) - rank + pos >= 0]
        wide = [x for x in extents if not is_one(x)]
        chosen = wide[0] if wide else extents[0]
        if any(not same(chosen, other) for other in wide[1:]):
            return None
        out.append(chosen)
    return tuple(out)
