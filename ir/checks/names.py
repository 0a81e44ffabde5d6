"""E01xx — names and element types. The findings come from the one inference walk (`cake.ir.typing`)."""

from __future__ import annotations

from collections.abc import Iterable

from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import PINGPONG, PLAIN, PRODUCER_NORMS, derive
from cake.ir.checks.registry import Finding, check, finding
from cake.ir.nodes import ValueRange, ValueSet


@check("E0101", "undefined name", "undefined name `{name}` in {where}", examples=[
    derive(PLAIN, ("let col: i32[BK] = k*BK + arange(BK)", "let col: i32[BK] = kk*BK + arange(BK)")),
    derive(PINGPONG, ("pingpong consumer around mma", "pingpong consumers around mma")),
])
def undefined_name(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0101")


@check("E0102", "assignment to an undeclared tile", "assignment to undeclared tile `{name}`", examples=[
    derive(PLAIN, ("    best = minimum(m, best)", "    bst = minimum(m, best)")),
])
def undeclared_assign(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0102")


@check("E0103", "element type mismatch", "element type mismatch in {what}: {got} where {want} is expected",
       examples=[
           derive(PLAIN, ("let cf: f32[BK, 128] = cast(ct, f32)", "let cf: f32[BK, 128] = ct")),
           derive(PLAIN, ("store besti -> ids", "store best -> ids")),
       ])
def dtype_mismatch(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0103")


@check("E0104", "wrong arguments to a builtin", "wrong arguments to builtin `{name}`: {got}",
       examples=[
           derive(PLAIN, ("let m: f32[BN] = min(dist, axis=1)", "let m: f32[BN] = min(dist, 1)")),
           derive(PLAIN, ("best = minimum(m, best)", "best = minimum(m, best, m)")),
       ])
def builtin_arity(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0104")


@check("E0105", "name used as the wrong kind", "`{name}` is a {kind}, not {wanted}", examples=[
    derive(PINGPONG, ("let cn: f32[BK] = csq[s]", "let cn: f32[BK] = csq")),
    derive(PLAIN, ("let ct: T[BK, 128] = load c[b, k*BK : +BK, :] masked other 0",
                   "let ct: T[BK, 128] = c[b, k*BK : +BK, :]")),
    derive(PRODUCER_NORMS, ("-> csq[s]\n", "-> csq[s] masked\n")),
])
def wrong_kind(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0105")


@check("E0106", "duplicate declaration", "`{name}` declared twice (already a {previous})", examples=[
    derive(PLAIN, ("dims B, N, K", "dims B, N, K, BN")),
    derive(PLAIN, ("    let m: f32[BN] = min(dist, axis=1)\n",
                   "    let m: f32[BN] = min(dist, axis=1)\n    let m: f32[BN] = min(dist, axis=1)\n")),
])
def duplicate(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0106")


@check("E0107", "param default outside its domain",
       "param `{name}` defaults to {default}, outside its domain {domain}", examples=[
           derive(PLAIN, ("param BN = 128 in {64, 128}", "param BN = 256 in {64, 128}")),
           derive(PLAIN, ("param STAGES = 2 in 1 .. 5", "param STAGES = 5 in 1 .. 5")),
       ])
def default_outside_domain(ctx: CheckContext) -> Iterable[Finding]:
    # The default is the configuration the schedule commits to; a search only moves within the domain, so
    # a default outside it is a configuration no tuning run would have produced (ranges are half-open).
    for param in ctx.kernel.params:
        domain = param.domain
        if isinstance(domain, ValueSet):
            inside, shown = param.default in domain.values, "{" + ", ".join(map(str, domain.values)) + "}"
        else:
            assert isinstance(domain, ValueRange)
            inside, shown = domain.start <= param.default < domain.stop, f"{domain.start} .. {domain.stop}"
        if not inside:
            yield finding(param, f"param `{param.name}`", f"{param.default} is not in {shown}",
                          help=f"pick a default from {shown}, or widen the domain",
                          name=param.name, default=param.default, domain=shown)
