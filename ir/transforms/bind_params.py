"""bind_params: specialize a kernel for one param assignment.

    from cake.ir.transforms.bind_params import bind_params
    bound = bind_params(kernel, {"BN": 64, "STAGES": 3})

Each param keeps its name and domain; its `default` becomes the assigned value, so the specialized kernel
prints as valid IR, hashes to a distinct cache key, and every later pass reads one value per param. Params
not in the assignment keep their defaults. An unknown name, or a value outside the param's domain, is
refused with a located diagnostic (E0701): the domain is the space the checker proved things about.

This is the one param binding: the lowering pipelines (call-time specialization included), the experiments'
specialized schedule files and the agents' param moves all call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from cake.ir.nodes import Domain, Kernel, ValueRange, ValueSet

from cake.diagnostics import Diagnostic, DiagnosticError

BAD_PARAM = "E0701"  # an unknown param, or a value outside its domain (listed with the lowering's E07xx codes)


def in_domain(domain: Domain, value: int) -> bool:
    if isinstance(domain, ValueSet):
        return value in domain.values
    assert isinstance(domain, ValueRange)
    return domain.start <= value < domain.stop


def describe_domain(domain: Domain) -> str:
    if isinstance(domain, ValueSet):
        return "{" + ", ".join(map(str, domain.values)) + "}"
    return f"{domain.start} .. {domain.stop}"


def bind_params(kernel: Kernel, values: Mapping[str, int], *, file: str = "<input>") -> Kernel:
    """`kernel` with each param in `values` defaulting to its value; DiagnosticError (E0701) on an unknown
    name or a value outside the domain. Returns `kernel` itself when nothing changes."""
    found: list[Diagnostic] = []
    known = {p.name for p in kernel.params}
    for name in values:
        if name not in known:
            found.append(Diagnostic(
                BAD_PARAM, f"`{name}` is not a param of schedule `{kernel.name}`", file=file, subject=name,
                help=f"params: {', '.join(sorted(known)) or 'none'}"))
    params = []
    for param in kernel.params:
        value = values.get(param.name, param.default)
        if not in_domain(param.domain, value):
            found.append(Diagnostic(
                BAD_PARAM, f"param `{param.name}` = {value} is outside its domain", span=param.span, file=file,
                subject=param.name, label=f"{value} not in {describe_domain(param.domain)}"))
        params.append(param if value == param.default else replace(param, default=value))
    if found:
        raise DiagnosticError(found)
    if all(a is b for a, b in zip(params, kernel.params, strict=True)):
        return kernel
    return replace(kernel, params=tuple(params))
