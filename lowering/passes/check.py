"""check: the static checker, run for the backend being lowered to.

Its backend-capability checks (E06xx) are how a backend refuses a schedule it cannot express: the refusal
is a located diagnostic, never a silent simplification. Warnings pass through; any error stops lowering.
The sizes of `static` dims in the context (a call's specialization) are bound, so budgets and box limits that
depend on them are proven for that call rather than left as notes.
"""

from __future__ import annotations

from cake.ir.nodes import Kernel
from cake.lowering.pipeline import LowerContext

from cake.diagnostics import DiagnosticError


def check_for_backend(kernel: Kernel, ctx: LowerContext) -> Kernel:
    from cake.ir.check import check

    found = check(kernel, arch=ctx.arch, backend=ctx.backend, dims=ctx.dims, file=ctx.filename)
    errors = [d for d in found if d.is_error]
    if errors:
        raise DiagnosticError(errors)
    return kernel
