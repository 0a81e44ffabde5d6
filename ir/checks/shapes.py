"""E02xx — tile shapes and tail masking. The findings come from the one inference walk (`cake.ir.typing`)."""

from __future__ import annotations

from collections.abc import Iterable

from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import PINGPONG, PLAIN, derive
from cake.ir.checks.registry import Finding, check


@check("E0201", "tile shape mismatch", "shape mismatch in {what}: {got}, expected {expected}", examples=[
    derive(PLAIN, ("let dot: f32[BN, BK] = mma(xt, ct.T) via dot", "let dot: f32[BN, BK] = mma(xt, ct) via dot")),
    derive(PLAIN, ("csq[None, :] - 2 * dot", "csq[:, None] - 2 * dot")),
    derive(PLAIN, ("let m: f32[BN] = min(dist, axis=1)", "let m: f32[BN] = min(dist, axis=0)")),
])
def shape_mismatch(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0201")


@check("E0202", "unmasked tail tile",
       "unmasked tile of `{tensor}` along `{dim}`: +{size} may not divide it, so the last tile reads out of bounds",
       examples=[
           derive(PLAIN, ("let ct: T[BK, 128] = load c[b, k*BK : +BK, :] masked other 0",
                          "let ct: T[BK, 128] = load c[b, k*BK : +BK, :]")),
           derive(PINGPONG, ("copy c[b, k*BK : +BK, :] -> cs[s] via tma masked", "copy c[b, k*BK : +BK, :] -> cs[s] via tma")),
       ])
def unmasked_tail(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0202")


@check("E0203", "reduction axis out of range", "reduction axis {axis} out of range for `{func}` over a rank-{rank} tile",
       examples=[derive(PLAIN, ("let m: f32[BN] = min(dist, axis=1)", "let m: f32[BN] = min(dist, axis=2)"))])
def axis_range(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0203")


@check("E0204", "whole-dim slice of a non-static dim",
       "whole-dim slice `:` of `{tensor}` along non-static dim `{dim}`: the tile would have a run-time size",
       examples=[derive(PLAIN, ("tensor ids: out i32[B, N]\n", "tensor ids: out i32[B, N]\ntensor w: in f32[N]\n"),
                         ("  store besti -> ids", "  let wt: f32[N] = load w[:]\n  store besti -> ids"))])
def whole_dim(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0204")


@check("E0205", "wrong number of indices", "wrong number of indices for `{name}`: {got}, expected {want}",
       examples=[derive(PLAIN, ("store besti -> ids[b, tile*BN : +BN] masked", "store besti -> ids[tile*BN : +BN] masked"))])
def index_count(ctx: CheckContext) -> Iterable[Finding]:
    return ctx.type_findings("E0205")
