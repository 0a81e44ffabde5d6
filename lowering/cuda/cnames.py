"""C++ spellings: element types, identifiers, literals."""

from __future__ import annotations

import math

from cake.ir.nodes import DType

CTYPE: dict[DType, str] = {
    DType.F32: "float", DType.F16: "__half", DType.BF16: "__nv_bfloat16", DType.I32: "int",
    DType.I64: "long long", DType.BOOL: "bool",
}

# Words an IR identifier may spell that C++ reserves (or that the generated code's helpers use).
_RESERVED = frozenset("""
alignas alignof and asm auto bool break case catch char class const constexpr continue default delete do double
else enum explicit export extern false float for friend goto if inline int long mutable namespace new noexcept not
nullptr operator or private protected public register return short signed sizeof static struct switch template
this throw true try typedef typeid typename union unsigned using virtual void volatile while xor min max
threadIdx blockIdx blockDim gridDim warpSize args smem
""".split())


def ident(name: str) -> str:
    """The C++ identifier for an IR name (IR names are already [A-Za-z_][A-Za-z0-9_]*)."""
    if name in _RESERVED or name.startswith("cake_") or name.startswith("__"):
        return f"{name}_"
    return name


def float_literal(value: float, dtype: DType = DType.F32) -> str:
    if math.isinf(value):
        text = "CAKE_INF" if value > 0 else "(-CAKE_INF)"
    elif math.isnan(value):
        text = "CAKE_NAN"
    else:
        text = repr(float(value))
        if "e" not in text and "." not in text:
            text += ".0"
        text += "f"
    return text if dtype is DType.F32 else f"({CTYPE[dtype]})({text})"


def is_low_float(dtype: DType) -> bool:
    return dtype in (DType.F16, DType.BF16)
