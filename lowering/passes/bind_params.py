"""bind_params: specialize a kernel for one param assignment.

Each param keeps its name and domain; its `default` becomes the assigned value, so the specialized kernel
prints as valid IR, hashes to a distinct cache key, and every later pass reads one value per param.
Params not in the assignment keep their defaults. An unknown name or a value outside the param's domain is
refused (E0701): the domain is the space the checker proved things about.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir.nodes import Domain, Kernel, ValueRange, ValueSet
from cake.lowering import codes
from cake.lowering.pipeline import LowerContext

from cake.diagnostics import Diagnostic, DiagnosticError


def in_domain(domain: Domain, value: int) -> bool:
    if isinstance(domain, ValueSet):
        return value in domain.values
    assert isinstance(domain, ValueRange)
    return domain.start <= value < domain.stop


def describe_domain(domain: Domain) -> str:
    if isinstance(domain, ValueSet):
        return "{" + ", ".join(map(str, domain.values)) + "}"
    return f"{domain.start} .. {domain.stop}"


def bind_params(kernel: Kernel, ctx: LowerContext) -> Kernel:
    found: list[Diagnostic] = []
    known = {p.name for p in kernel.params}
    for name in ctx.params:
        if name not in known:
            found.append(Diagnostic(
                codes.BAD_PARAM, f"`{name}` is not a param of schedule `{kernel.name}`", file=ctx.filename,
                subject=name, help=f"params: {', '.join(sorted(known)) or 'none'}"))
    params = []
    for param in kernel.params:
        value = ctx.params.get(param.name, param.default)
        if not in_domain(param.domain, value):
            found.append(Diagnostic(
                codes.BAD_PARAM, f"param `{param.name}` = {value} is outside its domain", span=param.span,
                file=ctx.filename, subject=param.name,
                label=f"{value} not in {describe_domain(param.domain)}"))
        params.append(replace(param, default=value))
    if found:
        raise DiagnosticError(found)
    return replace(kernel, params=tuple(params))
