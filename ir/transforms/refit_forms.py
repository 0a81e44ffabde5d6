"""refit_forms: committed wgmma forms re-fitted to their tiles at the current param defaults.

A param move that resizes an accumulator (`BK` 128 -> 64 under `let dot: f32[BN, BK] = mma(...)`) would leave
`via wgmma.m64n128k16` on a tile that instruction no longer divides. This pass gives every wgmma the widest N
of the mma table (`cake.arch.mma_forms_of`) that tiles its columns; forms whose columns do not
evaluate at the defaults, or that no width tiles, are left for the checker to judge.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.visit import transform

from cake.arch import MmaFamily, mma_forms_of

_WGMMA = mma_forms_of(MmaFamily.WGMMA)
WGMMA_M = _WGMMA[0].m
WGMMA_WIDTHS = tuple(sorted({f.n for f in _WGMMA}))  # every N the table lists


def wgmma_n(columns: int) -> int | None:
    """The widest wgmma N of the table that tiles `columns` (one instruction per 64-row block)."""
    return next((width for width in reversed(WGMMA_WIDTHS) if columns % width == 0), None)


def refit_forms(kernel: n.Kernel) -> n.Kernel | None:
    """`kernel` with each wgmma form refitted to its tile; None when every form already fits."""
    env = analysis.default_env(kernel)

    def refit(node: object) -> object:
        if not (isinstance(node, n.Let) and isinstance(node.value, n.Mma) and node.type is not None):
            return node
        form = node.value.form
        if not form.startswith("wgmma.m"):
            return node
        cols = analysis.try_value(node.type.shape[-1], env)
        width = wgmma_n(cols) if cols is not None else None
        k = form.rsplit("k", 1)[-1]
        fitted = f"wgmma.m{WGMMA_M}n{width}k{k}"
        return replace(node, value=replace(node.value, form=fitted)) if width is not None and fitted != form else node

    out = replace(kernel, launches=transform(kernel.launches, refit))
    return None if out.launches is kernel.launches else out
