"""drop_unused_params: remove the params nothing refers to any more.

A param that sizes nothing would only make the search propose the same schedule under other names; passes
that replace a param's uses (warp specialization fixing a tile to the warpgroup, a refit) end with this one.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import nodes as n
from cake.ir.visit import mentions


def drop_unused_params(kernel: n.Kernel) -> n.Kernel | None:
    """`kernel` without its unreferenced params; None when every param is used."""
    body = (kernel.launches, kernel.tensors, kernel.scratch)
    kept = tuple(p for p in kernel.params if mentions(body, {p.name}))
    return None if len(kept) == len(kernel.params) else replace(kernel, params=kept)
