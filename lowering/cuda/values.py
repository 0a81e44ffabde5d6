"""Tile values during CUDA codegen: what a name or an expression is, and how to read one element of it.

A tile value never exists as a whole in one thread. Each kind says how to produce the C++ expression for
one element, given an `Elem` that the surrounding loop provides:

| kind      | lives in                                   | element access needs                  |
|-----------|--------------------------------------------|---------------------------------------|
| Scalar    | one C++ scalar (params, loop vars, literals) | nothing                             |
| Lazy      | recomputed from indices (arange, global loads, smem vectors) | the element's indices |
| Frag      | per-thread registers of an mma result      | the fragment register `reg`           |
| Vec       | per-thread row or column slots of a fragment layout | the slot of the matching family |
| SmemTile  | one stage of a shared buffer (mma operand) | the element's indices                 |
| HeldA     | a wgmma A operand loaded once into registers (`let xa = xs[w]`) | read by the mma only   |
| Bcast     | a vector viewed along one axis of a 2-D tile | delegates to the vector              |
| Map       | elementwise function of other values       | delegates to its operands             |

Elementwise expressions stay symbolic (Map) until a statement materializes them, so `dist = cn - 2*dot`
costs nothing until the reduction that reads it inlines it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cake.ir.nodes import DType
from cake.lowering.cuda.errors import Code, Unlowerable
from cake.lowering.cuda.layouts import FragLayout, SmemTileLayout


class Fam(enum.Enum):
    """Which slots of a fragment layout a vector follows: its rows or its columns."""

    ROW = "row"
    COL = "col"
    THREAD = "thread"  # no mma around: element i lives in thread i % T, slot i / T (T = the role's threads)


@dataclass(frozen=True, slots=True)
class Elem:
    """One element being computed: per axis its index (C expr, tile-relative), slot family and slot."""

    idx: tuple[str, ...]
    fam: tuple[Fam | None, ...]
    slot: tuple[str | None, ...]
    reg: str | None = None  # fragment register, when iterating a fragment

    @property
    def rank(self) -> int:
        return len(self.idx)

    def axis(self, a: int) -> Elem:
        return Elem((self.idx[a],), (self.fam[a],), (self.slot[a],))

    def adapt(self, rank: int) -> Elem:
        """Numpy broadcasting: a lower-rank operand aligns with the trailing axes."""
        if rank == self.rank:
            return self
        if rank == 0:
            return Elem((), (), ())
        if rank == 1 and self.rank == 2:
            return self.axis(1)
        raise Unlowerable(Code.UNSUPPORTED, f"cannot broadcast a rank-{rank} tile into a rank-{self.rank} one")

    @staticmethod
    def generic(*idx: str) -> Elem:
        return Elem(tuple(idx), tuple(None for _ in idx), tuple(None for _ in idx))


@dataclass(frozen=True, slots=True)
class Value:
    dtype: DType
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def at(self, e: Elem) -> str:
        raise NotImplementedError

    def leaves(self) -> tuple[Value, ...]:
        return (self,)

    def frag_layout(self) -> FragLayout | None:
        """The fragment layout of a materialized leaf (the layout a 2-D value must be iterated in)."""
        for leaf in self.leaves():
            if isinstance(leaf, (Frag, Vec)) and leaf.layout is not None:
                return leaf.layout
        return None

    def has_frag(self) -> bool:
        return any(isinstance(leaf, Frag) for leaf in self.leaves())

    def vec_fams(self) -> set[Fam]:
        return {leaf.fam for leaf in self.leaves() if isinstance(leaf, Vec)}

    @property
    def reads_smem(self) -> bool:
        return any(getattr(leaf, "smem", False) for leaf in self.leaves())


@dataclass(frozen=True, slots=True)
class Scalar(Value):
    c: str = ""

    def at(self, e: Elem) -> str:
        return self.c


@dataclass(frozen=True, slots=True)
class Lazy(Value):
    """Recomputed per element from its indices: fn(idx) -> C expression."""

    fn: Callable[[tuple[str, ...]], str] = field(default=lambda idx: "0", compare=False)
    smem: bool = False
    what: str = ""

    def at(self, e: Elem) -> str:
        return self.fn(e.idx)


@dataclass(frozen=True, slots=True)
class Frag(Value):
    name: str = ""
    layout: FragLayout | None = None

    def at(self, e: Elem) -> str:
        if e.reg is None:
            raise Unlowerable(Code.LAYOUT, f"the mma result `{self.name}` can only be combined elementwise with "
                              "tiles of its own shape, row vectors [:, None] and column vectors [None, :]")
        return f"{self.name}[{e.reg}]"


@dataclass(frozen=True, slots=True)
class Vec(Value):
    """A 1-D tile held in the row (or column) slots of a fragment layout."""

    name: str = ""
    fam: Fam = Fam.ROW
    layout: FragLayout | None = None
    nslots: int = 0  # slots per thread (THREAD family; fragment families use the layout's)

    def at(self, e: Elem) -> str:
        if e.rank != 1:
            raise Unlowerable(Code.LAYOUT, f"`{self.name}` is a vector; index it with [:, None] or [None, :]")
        if e.fam[0] is not self.fam or e.slot[0] is None:
            want = {Fam.ROW: "rows", Fam.COL: "columns", Fam.THREAD: "role's threads"}[self.fam]
            raise Unlowerable(Code.LAYOUT, f"`{self.name}` follows the {want} of an mma result and cannot be "
                              "read along the other axis or at an arbitrary index",
                              help="broadcast it along the axis it was reduced over ([:, None] for row vectors)")
        return f"{self.name}[{e.slot[0]}]"


@dataclass(frozen=True, slots=True)
class SmemVec(Value):
    """A 1-D shared-memory vector (a stage of `smem csq[S]: f32[BK]`, or a generator scratch row)."""

    ptr: str = ""
    smem: bool = True
    owned: bool = False  # a 1-D tile the role declared (writable), not a buffer stage or a reduction row

    def at(self, e: Elem) -> str:
        return f"{self.ptr}[{e.idx[0]}]"

    def lvalue(self, e: Elem) -> str:
        return self.at(e)


@dataclass(frozen=True, slots=True)
class SmemTile(Value):
    """One stage of a 2-D shared buffer, possibly viewed transposed (an mma operand `cs[s].T`)."""

    base: str = ""  # C expression: uint8_t* to the stage
    layout: SmemTileLayout | None = None
    offset_fn: str = ""
    buffer: str = ""
    swizzle_bytes: int = 0
    transposed: bool = False
    smem: bool = True

    def at(self, e: Elem) -> str:
        return self._element(e, const=True)

    def lvalue(self, e: Elem) -> str:
        return self._element(e, const=False)

    def _element(self, e: Elem, const: bool) -> str:
        from cake.lowering.cuda.cnames import CTYPE

        r, c = (e.idx[1], e.idx[0]) if self.transposed else (e.idx[0], e.idx[1])
        qual = "const " if const else ""
        return f"*reinterpret_cast<{qual}{CTYPE[self.dtype]}*>({self.base} + {self.offset_fn}({r}, {c}))"

    def transpose(self) -> SmemTile:
        return SmemTile(self.dtype, (self.shape[1], self.shape[0]), self.base, self.layout, self.offset_fn,
                        self.buffer, self.swizzle_bytes, not self.transposed)


@dataclass(frozen=True, slots=True)
class HeldA(Value):
    """A wgmma A operand held in registers: `uint32_t name[k-steps][m-blocks][4]`, each warp's ldmatrix
    fragments of its 16 rows of every 64-row block, read once from `tile` where the schedule's `let` binds it.
    Only the mma reads it (the backend holds a let this way only when every use is a wgmma's A)."""

    name: str = ""
    tile: SmemTile | None = None

    def at(self, e: Elem) -> str:
        raise Unlowerable(Code.LAYOUT, f"`{self.name}` is a wgmma A operand held in registers; only the mma reads it")


@dataclass(frozen=True, slots=True)
class Bcast(Value):
    """A vector viewed as a 2-D tile: `v[None, :]` (axis 1: it indexes columns) or `v[:, None]` (axis 0)."""

    inner: Value | None = None
    axis: int = 1

    def at(self, e: Elem) -> str:
        assert self.inner is not None
        if e.rank != 2:
            raise Unlowerable(Code.UNSUPPORTED, "a broadcast vector used outside a 2-D expression")
        return self.inner.at(e.axis(self.axis))

    def leaves(self) -> tuple[Value, ...]:
        assert self.inner is not None
        return self.inner.leaves()


@dataclass(frozen=True, slots=True)
class Map(Value):
    """Elementwise: render(operand element expressions) -> C expression."""

    args: tuple[Value, ...] = ()
    render: Callable[[list[str]], str] = field(default=lambda parts: "0", compare=False)
    op: str = ""  # the builtin or operator, for rewrites that need the structure (e.g. `where`)

    def at(self, e: Elem) -> str:
        return self.render([a.at(e.adapt(a.rank)) for a in self.args])

    def leaves(self) -> tuple[Value, ...]:
        out: list[Value] = []
        for a in self.args:
            out.extend(a.leaves())
        return tuple(out)


def replace_leaf(value: Value, old: Value, new: Value) -> Value:
    """`value` rebuilt with every leaf equal to `old` replaced by `new`: the same elementwise expression reading
    that operand from somewhere else (a shared tile's elements from registers a 16-byte load filled)."""
    if value == old:
        return new
    if isinstance(value, Map):
        return replace(value, args=tuple(replace_leaf(a, old, new) for a in value.args))
    if isinstance(value, Bcast) and value.inner is not None:
        return replace(value, inner=replace_leaf(value.inner, old, new))
    return value
