"""bind_dtypes: narrow each dtype variable to the type one call binds it to.

A backend that specializes per call (the CUDA backend compiles one translation unit per dtype binding) runs
its pipeline again with the call's dtypes; narrowing `dtype T in {f32, f16, bf16}` to `{bf16}` lets the
checker judge exactly the code that will run (a check that fails only for f32 no longer blocks a bf16 call,
and one that fails for the bound type refuses it). Variables the context does not bind are left as they are;
a binding outside a variable's choices, or to an unknown variable, is refused (E0703).
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir.nodes import Kernel
from cake.lowering import codes
from cake.lowering.pipeline import LowerContext

from cake.diagnostics import Diagnostic, DiagnosticError


def bind_dtypes(kernel: Kernel, ctx: LowerContext) -> Kernel:
    if not ctx.dtypes:
        return kernel
    found: list[Diagnostic] = []
    known = {d.name: d for d in kernel.dtype_vars}
    for name, dtype in ctx.dtypes.items():
        var = known.get(name)
        if var is None or dtype not in var.choices:
            allowed = ", ".join(c.value for c in var.choices) if var is not None else "no such dtype variable"
            found.append(Diagnostic(codes.HOST_BINDING, f"dtype `{name}` = {dtype.value} is not one of the schedule's "
                                    f"choices ({allowed})", span=var.span if var is not None else None,
                                    file=ctx.filename, subject=name))
    if found:
        raise DiagnosticError(found)
    return replace(kernel, dtype_vars=tuple(replace(d, choices=(ctx.dtypes[d.name],)) if d.name in ctx.dtypes
                                            else d for d in kernel.dtype_vars))
