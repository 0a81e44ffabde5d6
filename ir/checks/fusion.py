"""E0412 — launch fusion: what `fuse A into B` needs to be one correct kernel.

A fused launch's blocks run grid-stride inside B's persistent CTAs, before B's shared memory and barriers are
set up; a grid-wide barrier then orders every write of A before any read of B, as the launch boundary did.
So the directive is legal only where that reading keeps the schedule's meaning and B's kernel can hold A:

- both launches exist, and A comes right before B (no launch between them is reordered);
- B is persistent (a grid-wide barrier needs every CTA resident: only a persistent grid is sized to the
  device), and neither launch is part of another fusion (one level; a launch is fused at most once);
- A declares no shared or tensor memory, mbarriers, ping-pong or register reallocation (its code runs before
  B's prologue and at B's entry register count), and needs no more threads than B's CTA has.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import FUSED, derive
from cake.ir.checks.registry import Finding, check, finding

_NORMS = "role main: warps 4 {\n  let cf"


@check("E0412", "illegal launch fusion", "`fuse {launch} into {into}`: {why}", examples=[
    derive(FUSED, ("fuse centroid_norms into assign", "fuse centroid_norm into assign")),
    derive(FUSED, ("fuse centroid_norms into assign", "fuse assign into centroid_norms")),
    derive(FUSED, ("grid persistent tile", "grid tile")),
    derive(FUSED, ("grid kt in cdiv(K, 64), b in B\n", "grid kt in cdiv(K, 64), b in B\nsmem st: f32[64]\n")),
    derive(FUSED, (_NORMS, "role main: warps 20 {\n  let cf")),
    derive(FUSED, ("fuse centroid_norms into assign\n",
                   "fuse centroid_norms into assign\nfuse centroid_norms into assign\n")),
])
def launch_fusion(ctx: CheckContext) -> Iterable[Finding]:
    for fusion in ctx.kernel.fusions:
        for why, help in fusion_problems(ctx.kernel, fusion, ctx.env):
            yield finding(fusion, f"`fuse {fusion.launch} into {fusion.into}`", "cannot be fused", help=help,
                          launch=fusion.launch, into=fusion.into, why=why)


def fusion_problems(kernel: n.Kernel, fusion: n.Fusion, env: an.Env) -> Iterator[tuple[str, str]]:
    """(why, help) for each rule of E0412 that `fusion`, one of `kernel.fusions` (by identity), breaks under `env`
    (the params' values and bound dims that thread counts are read at). Nothing yielded: the fusion is legal.

    The structural rules come first, since the later ones need both launches. The check reports these; the
    `fuse_launches` pass adds a fusion only where this yields nothing.
    """
    index = next((i for i, f in enumerate(kernel.fusions) if f is fusion), None)
    if index is None:
        raise ValueError(f"`fuse {fusion.launch} into {fusion.into}` is not one of the kernel's fusions: "
                         "judge a fusion inside the kernel it belongs to (add it to `kernel.fusions` first)")
    earlier = kernel.fusions[:index]
    order = [launch.name for launch in kernel.launches]
    missing = [name for name in (fusion.launch, fusion.into) if kernel.launch(name) is None]
    if missing:
        yield (f"no launch named `{missing[0]}`", f"launches are {', '.join(f'`{o}`' for o in order)}")
        return
    if order.index(fusion.launch) + 1 != order.index(fusion.into):
        yield (f"`{fusion.launch}` is not the launch right before `{fusion.into}`",
               "fuse a launch into the one that follows it (fusion must not reorder launches)")
        return
    others = [f for f in kernel.fusions if f is not fusion]
    if any(f.launch == fusion.launch for f in earlier):
        yield (f"`{fusion.launch}` is fused twice", "keep one `fuse` line per launch")
        return
    if any(f.into == fusion.launch or f.launch == fusion.into for f in others):
        yield ("a launch is both fused and fused into", "fuse one level: a prelude launch into one persistent launch")
    launch, into = kernel.launch(fusion.launch), kernel.launch(fusion.into)
    assert launch is not None and into is not None
    if into.grid.kind is not n.GridKind.PERSISTENT:
        yield (f"`{fusion.into}` is not persistent, so its CTAs need not all be resident at the grid-wide barrier",
               f"write `grid persistent ...` in `{fusion.into}`, or drop the `fuse` line")
    declared = [f"shared memory `{d.name}`" for d in launch.smem] + [f"tensor memory `{d.name}`" for d in launch.tmem] \
        + [f"mbarrier `{d.name}`" for d in launch.barriers] + [f"ping-pong of `{p.role}`" for p in launch.pingpongs] \
        + [f"`regs` of role `{r.name}`" for r in launch.roles if r.regs is not None]
    if declared:
        yield (f"the fused launch declares {declared[0]}; it runs before `{fusion.into}`'s prologue and at its entry "
               "register count", "keep the fused launch to roles over registers and global memory")
    try:
        need, have = an.launch_threads(launch, env), an.launch_threads(into, env)
    except an.Unbound:
        return  # role counts that depend on an unbound dim: E0301's note already says what to bind
    if need > have:
        yield (f"`{fusion.launch}` needs {need} threads a block, `{fusion.into}`'s CTA has {have}",
               f"give `{fusion.launch}` at most {have // 32} warps")
