"""The static checker's driver: run every applicable check and collect every diagnostic.

    from cake.ir.check import check, check_text
    diagnostics = check(kernel)                          # the kernel's own target, backend-neutral
    diagnostics = check(kernel, arch="sm_80", backend="triton")
    diagnostics = check_text(text, "assign.cake")        # parse + check; parse errors come back as diagnostics
    bindings = servable_dtype_bindings(kernel, backend="cuda")  # the dtype bindings that backend can lower

A check that crashes on odd input is a bug in CAKE, not a finding about the schedule: the driver raises
`cake.errors.InternalError` naming the check and carrying the schedule text (never a diagnostic, so it can
never read as a rejection).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from cake.ir.analysis import dtype_bindings
from cake.ir.checks.context import CheckContext
from cake.ir.checks.registry import Backend, CheckSpec, Family, Finding, all_checks
from cake.ir.nodes import DType, Kernel

from cake.diagnostics import Diagnostic, DiagnosticError, Severity
from cake.errors import InternalError

# What a buggy check can raise on malformed-but-parsed input. Caught only here, at the driver boundary, and
# re-raised as an InternalError.
CHECK_BUGS = (ArithmeticError, AssertionError, AttributeError, IndexError, KeyError, LookupError,
               RecursionError, TypeError, ValueError)

# Families that need a known target: without one they would report nonsense.
_ARCH_FAMILIES = frozenset({Family.RESOURCES, Family.LEGALITY})


def parse_backend(backend: str | Backend | None) -> Backend | None:
    if backend is None or isinstance(backend, Backend):
        return backend
    try:
        return Backend(backend)
    except ValueError:
        known = ", ".join(b.value for b in Backend)
        raise ValueError(f"unknown backend `{backend}`; known backends: {known}") from None


def check(kernel: Kernel, *, arch: str | None = None, backend: str | Backend | None = None,
          rules: Sequence[CheckSpec] = (), dims: Mapping[str, int] | None = None,
          file: str = "<input>") -> tuple[Diagnostic, ...]:
    """Every diagnostic the registered checks (plus `rules`, e.g. learned rules) find in `kernel`.

    `arch` defaults to the kernel's target; `backend` selects backend-capability checks (None: only
    the backend-neutral ones); `dims` binds symbolic dims to sizes so budgets that depend on them can
    be proven (otherwise those budgets are reported as notes).
    """
    ctx = CheckContext(kernel, arch or kernel.target, parse_backend(backend), dims)
    out: list[Diagnostic] = []
    for spec in (*all_checks(), *rules):
        if not spec.applies_to(ctx.backend):
            continue
        if ctx.arch is None and spec.family in _ARCH_FAMILIES and spec.id != "E0500":
            continue
        out.extend(run_one(spec, ctx, file))
    return tuple(sorted(out, key=_order))


def run_one(spec: CheckSpec, ctx: CheckContext, file: str) -> list[Diagnostic]:
    try:
        return [_diagnostic(spec, f, file) for f in spec.run(ctx)]
    except CHECK_BUGS as error:
        from cake.ir.printer import print_kernel

        raise InternalError(f"check {spec.id} ({spec.title})", error, print_kernel(ctx.kernel)) from error


def _diagnostic(spec: CheckSpec, f: Finding, file: str) -> Diagnostic:
    try:
        message = f.message or spec.message.format(**f.fields)
    except (KeyError, IndexError, ValueError):
        message = spec.title
    severity = f.severity if f.severity is not Severity.ERROR else spec.severity
    return Diagnostic(spec.id, message, severity=severity, span=f.span, file=file, subject=f.subject,
                      label=f.label, help=f.help, notes=f.notes)


def _order(d: Diagnostic) -> tuple[int, int, str]:
    span = d.span
    return (span.line if span else 0, span.column if span else 0, d.code)


def servable_dtype_bindings(kernel: Kernel, *, arch: str | None = None, backend: str | Backend | None = None,
                            file: str = "<input>") -> tuple[dict[str, DType], ...]:
    """The bindings of the kernel's dtype variables (`dtype T in {f32, f16, bf16}`: T = f32, T = f16, T = bf16)
    that `backend` can lower: each narrowed to that one choice, as a call narrows it (the lowering's
    `bind_dtypes`), and accepted by the checks with no error.

    A schedule may declare a type its backend cannot serve: the CUDA backend's `via dot` takes 16-bit operands
    only, so E0611 warns about f32 for the whole domain and refuses a call bound to it. Whoever chooses the
    dtypes a kernel is verified or timed in asks this first, instead of feeding it a type every call refuses."""
    bindings = dtype_bindings(kernel)
    if not kernel.dtype_vars:
        return bindings
    served = []
    for binding in bindings:
        narrowed = replace(kernel, dtype_vars=tuple(replace(v, choices=(binding[v.name],))
                                                    for v in kernel.dtype_vars))
        if not errors(check(narrowed, arch=arch, backend=backend, file=file)):
            served.append(binding)
    return tuple(served)


def check_text(text: str, filename: str = "<input>", *, arch: str | None = None,
               backend: str | Backend | None = None, rules: Sequence[CheckSpec] = (),
               dims: Mapping[str, int] | None = None) -> tuple[Diagnostic, ...]:
    """Parse `text` and check it; parse errors are returned as diagnostics (checks then do not run)."""
    from cake.ir.parser import parse

    try:
        kernel = parse(text, filename)
    except DiagnosticError as error:
        return error.diagnostics
    return check(kernel, arch=arch, backend=backend, rules=rules, dims=dims, file=filename)


def errors(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    return tuple(d for d in diagnostics if d.is_error)
