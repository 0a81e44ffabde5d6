"""bind_params as a pipeline step: the assignment comes from the LowerContext (`cake.ir.transforms.bind_params`
is the pass; this adapter only reads its arguments from the context)."""

from __future__ import annotations

from cake.ir.nodes import Kernel
from cake.ir.transforms.bind_params import bind_params as bind
from cake.lowering.pipeline import LowerContext


def bind_params(kernel: Kernel, ctx: LowerContext) -> Kernel:
    return bind(kernel, ctx.params, file=ctx.filename)
