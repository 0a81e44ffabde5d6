"""What the Triton emitter knows about each generated value: its source text, element type and tile axes.

Triton works on power-of-two tiles. A tile axis of logical extent `n` is emitted with a power-of-two
physical extent `p >= n`; the lanes `n .. p` are *padding*, a backend artifact the schedule never sees.
`Axis` records both extents and when padding exists, so the emitter can keep padded lanes out of every
result: they are masked on loads and stores, replaced by the identity before a reduction over their axis,
and zeroed before an mma contracts over them.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TypeAlias

from cake.ir import types
from cake.ir.nodes import DType, TypeVar

# The smallest extent Triton's tl.dot accepts for M, N and K on NVIDIA targets; whole-dim slices of static
# dims are padded at least this far so that any of them can feed an mma.
MIN_DOT_EXTENT = 16


class Pad(enum.Enum):
    NONE = "none"  # physical == logical
    ALWAYS = "always"  # physical > logical, known when the source is generated
    STATIC = "static"  # a static dim: padded iff its value is not a power of two (decided at Triton compile time)


@dataclass(frozen=True, slots=True)
class Axis:
    extent: str  # logical extent, as kernel source text ("BN", "D", "48")
    physical: str  # the power-of-two extent Triton works on ("BN", "D_P2", "64")
    pad: Pad = Pad.NONE
    size: int | None = None  # the physical extent when known at generation time (None for static dims)

    @property
    def padded_if(self) -> str | None:
        """A constexpr condition (kernel source) that holds when the axis has padding lanes."""
        if self.pad is Pad.NONE:
            return None
        if self.pad is Pad.ALWAYS:
            return "True"
        return f"{self.physical} != {self.extent}"


UNIT = Axis("1", "1", Pad.NONE, 1)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << math.ceil(math.log2(n))


# An element type as the emitter tracks it: a concrete DType, or the name of a dtype variable (`T`).
Elem: TypeAlias = DType | str


class Lit(enum.Enum):
    """A Python literal (or a constexpr int): weakly typed, it adopts the other operand's type."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"


# Python operator precedence for the emitted text (higher binds tighter).
PREC_ATOM = 100
PREC_UNARY = 60
PREC_MUL = 50
PREC_ADD = 40
PREC_AND = 30
PREC_OR = 20
PREC_CMP = 10
PREC_TERNARY = 5


@dataclass(frozen=True, slots=True)
class Val:
    code: str
    dtype: Elem | None  # None: a literal (see `lit`) or not known to the emitter
    axes: tuple[Axis, ...] = ()
    lit: Lit | None = None
    prec: int = PREC_ATOM
    # Every padding lane holds 0 (a load's `other 0` fills them; 0 op 0 keeps them): zeroing them again before
    # an mma or a sum is redundant, so the emitter leaves that select out.
    zero_pad: bool = False

    @property
    def is_tile(self) -> bool:
        return bool(self.axes)

    def atom(self) -> str:
        """The code, parenthesized unless it is already an atom (for indexing or a method call)."""
        return self.code if self.prec >= PREC_ATOM else f"({self.code})"

    def operand(self, prec: int, right: bool = False) -> str:
        """The code as an operand of an operator of precedence `prec`."""
        tight = self.prec > prec if right or prec == PREC_CMP else self.prec >= prec
        return self.code if tight else f"({self.code})"


TL_DTYPES: dict[DType, str] = {
    DType.F32: "tl.float32", DType.F16: "tl.float16", DType.BF16: "tl.bfloat16",
    DType.I32: "tl.int32", DType.I64: "tl.int64", DType.BOOL: "tl.int1",
}
TORCH_DTYPES: dict[DType, str] = {
    DType.F32: "torch.float32", DType.F16: "torch.float16", DType.BF16: "torch.bfloat16",
    DType.I32: "torch.int32", DType.I64: "torch.int64", DType.BOOL: "torch.bool",
}
INT_LIMITS: dict[DType, tuple[int, int]] = {DType.I32: (-(2**31), 2**31 - 1), DType.I64: (-(2**63), 2**63 - 1)}


def float_text(value: float) -> str:
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if math.isnan(value):
        return 'float("nan")'
    return repr(float(value))


def _ir_elem(v: Val) -> types.Elem | None:
    if v.lit is not None:
        return types.Weak.FLOAT if v.lit is Lit.FLOAT else types.Weak.INT
    return TypeVar(v.dtype) if isinstance(v.dtype, str) else v.dtype


def promote(a: Val, b: Val, float_vars: frozenset[str]) -> tuple[Elem | None, Lit | None]:
    """The element type of an arithmetic result: the IR's promotion (`cake.ir.types.promote`) on the
    emitter's values.

    Returns (dtype, None) for a typed result, (None, lit) for literal-only arithmetic, and (None, None) when
    the type is not known statically. A dtype variable is bound only when Triton compiles the kernel; what
    the emitter knows of it: meeting an integer it stays itself, meeting f32 it becomes f32 when every
    choice in its domain is a float (`float_vars`).
    """
    x, y = _ir_elem(a), _ir_elem(b)
    if x is None or y is None:
        return None, None
    var = [e for e in (x, y) if isinstance(e, TypeVar)]
    if len(var) == 1 and not any(isinstance(e, types.Weak) for e in (x, y)):
        fixed = y if x is var[0] else x
        assert isinstance(fixed, DType)
        if not fixed.is_float:
            return var[0].name, None
        return (DType.F32, None) if fixed is DType.F32 and var[0].name in float_vars else (None, None)
    common = types.promote(x, y)
    if isinstance(common, types.Weak):
        return None, Lit.FLOAT if common is types.Weak.FLOAT else Lit.INT
    if isinstance(common, TypeVar):
        return common.name, None
    return common, None


def broadcast(*shapes: tuple[Axis, ...]) -> tuple[Axis, ...]:
    """The IR's broadcast rule (`cake.ir.types.broadcast`) on tile axes. The checker has proven that the
    extents agree; two axes may still spell one extent differently ("BN" and "128"), so the first non-unit
    axis is taken without comparing the others."""
    out = types.broadcast(shapes, lambda axis: axis == UNIT, lambda _a, _b: True)
    assert out is not None
    return out


def expand(code: str, position: int, width: int, rank: int) -> str:
    """Index `code` (a tile of `width` axes) so its axes land at `position` in a rank-`rank` tile."""
    if width == rank:
        return code
    items = ["None"] * position + [":"] * width + ["None"] * (rank - position - width)
    return f"{code}[{', '.join(items)}]"
