"""narrow_dtypes: dtype variables restricted to the operand types a 16-bit mma form takes.

Precondition: every named variable has at least one choice the form takes (the wgmma/mma.sync k16 rows of
`cake.arch`'s mma table). Effect: `dtype T in {f32, f16, bf16}` becomes `dtype T in {f16, bf16}`, so a schedule
committed to such a form is never instantiated with an operand type its instruction does not exist for.
None when no named variable changes or one would be left with no choice.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import nodes as n
from cake.ir.transforms.sites import smem_of
from cake.ir.visit import walk_stmts as walk

from cake.arch import MmaFamily, mma_forms_of

K16_DTYPES = tuple(n.DType(d) for d in mma_forms_of(MmaFamily.WGMMA)[0].operand_dtypes)


def narrow_dtypes(kernel: n.Kernel, names: set[str] | frozenset[str],
                  allowed: tuple[n.DType, ...] = K16_DTYPES) -> n.Kernel | None:
    """`kernel` with the dtype variables `names` keeping only `allowed`; None when nothing changes or a
    variable would keep no type."""
    dtype_vars = []
    for var in kernel.dtype_vars:
        if var.name in names:
            choices = tuple(c for c in var.choices if c in allowed)
            if not choices:
                return None
            var = replace(var, choices=choices)
        dtype_vars.append(var)
    out = tuple(dtype_vars)
    return None if out == kernel.dtype_vars else replace(kernel, dtype_vars=out)


def operand_dtype_vars(launch: n.Launch, role: n.Role, mma: n.Mma,
                       allowed: tuple[n.DType, ...] = K16_DTYPES) -> set[str] | None:
    """The dtype variables an mma's operands are typed with; None when an operand has a fixed type outside
    `allowed` (or cannot be traced to a shared buffer or a typed let)."""
    lets = {s.name: s for s in walk(role.body) if isinstance(s, n.Let)}
    names: set[str] = set()
    for operand in (mma.a, mma.b):
        inner = operand.operand if isinstance(operand, n.Transpose) else operand
        buf = smem_of(launch, inner)
        let = lets.get(inner.id) if isinstance(inner, n.Name) else None
        tile = buf.type if buf is not None else let.type if let is not None else None
        if tile is None:
            return None
        if isinstance(tile.elem, n.TypeVar):
            names.add(tile.elem.name)
        elif tile.elem not in allowed:
            return None
    return names
