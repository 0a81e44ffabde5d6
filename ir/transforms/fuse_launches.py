"""fuse_launches: a launch's work moved into the persistent launch that follows it (`fuse A into B`), so a call
issues one kernel instead of two: B's CTAs run A's blocks grid-stride, meet at a grid-wide barrier, then run B's
roles (`cake.ir.nodes.Fusion`; the CUDA backend launches B cooperatively).

A generic compiler move: merge two adjacent launches where that is legal. It reads no op, tensor or launch name
and carries no number from a reference kernel; which launches qualify is exactly what check E0412 accepts
(`cake.ir.checks.fusion.fusion_problems`, the one statement of those rules): A right before B, B persistent,
neither already in a fusion that would make two levels, A over registers and global memory only (no shared or
tensor memory, mbarriers, ping-pong or `regs`) with no more threads a block than B's CTA. Thread counts are read
at the params' defaults, as the check reads them.

Precondition: a launch A, followed by a launch B, for which that predicate finds nothing. Effect: the kernel with
`fuse A into B` added (the `fuse` lines kept in launch order, so one set of fusions prints one way). What the
fusion costs or saves (a grid barrier for a launch, A's blocks on B's CTAs) is the cost model's to judge.

None when no launch qualifies (or the one named does not). There is no inverse pass: dropping the line undoes it.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.checks.fusion import fusion_problems


def fusable(kernel: n.Kernel) -> tuple[str, ...]:
    """The launches `fuse_launches` can fuse into the launch after them, in launch order."""
    return tuple(fusion.launch for fusion in _legal_fusions(kernel))


def fuse_launches(kernel: n.Kernel, launch: str | None = None) -> n.Kernel | None:
    """`kernel` with launch `launch` (default: the first that qualifies) fused into the persistent launch after it."""
    for fusion in _legal_fusions(kernel):
        if launch is None or fusion.launch == launch:
            return _with_fusion(kernel, fusion)
    return None


def _legal_fusions(kernel: n.Kernel) -> list[n.Fusion]:
    env = an.default_env(kernel)
    out = []
    for before, after in zip(kernel.launches, kernel.launches[1:], strict=False):
        if kernel.fused_into(before.name) is not None:
            continue  # already fused: a second line for it is E0412's "fused twice"
        fusion = n.Fusion(before.name, after.name)
        if not any(fusion_problems(_with_fusion(kernel, fusion), fusion, env)):
            out.append(fusion)
    return out


def _with_fusion(kernel: n.Kernel, fusion: n.Fusion) -> n.Kernel:
    order = {launch.name: i for i, launch in enumerate(kernel.launches)}
    fusions = sorted((*kernel.fusions, fusion), key=lambda f: order.get(f.launch, len(order)))
    return replace(kernel, fusions=tuple(fusions))
