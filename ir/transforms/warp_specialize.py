"""warp_specialize: `tma_producer`, then `split_consumer`, in one pass, plus what the pair needs to pay off.

The intermediate single-consumer schedule is usually slower than the plain one, so a search ranked by predicted
time rarely keeps it long enough to split it; this pass takes both steps. Precondition: `tma_producer`'s and
then `split_consumer`'s. Effect: theirs, and

* when the consumers ping-pong, the grid becomes persistent: the producer then fetches a CTA's next point tiles
  while its consumers finish the current ones (the per-replica `empty` barriers make the refill safe);
* every reduction over a streamed operand alone is hoisted into a launch of its own (`hoist_reduction`): a
  consumer that reduces a TMA-fed stage reads every element of a swizzled tile through the CUDA cores, once
  per consumer and stage (measured on the H200: 3x slower than with the norms hoisted).

Every number the result carries is a param the search moves (`PRODUCER_REGS`, `CONSUMER_REGS`, `CONSUMERS`,
`HOIST_WARPS`, the seed's tiles and stages) or comes from `cake.arch`. None when either step does not apply.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import nodes as n
from cake.ir.transforms.hoist_reduction import hoist_reduction
from cake.ir.transforms.sites import main_launch
from cake.ir.transforms.split_consumer import split_consumer
from cake.ir.transforms.tma_producer import tma_producer
from cake.ir.visit import walk_stmts, with_launch


def warp_specialize(kernel: n.Kernel) -> n.Kernel | None:
    first = tma_producer(kernel)
    out = None if first is None else split_consumer(first)
    if out is None:
        return None
    launch = main_launch(out)
    if launch.pingpongs and launch.grid.kind is not n.GridKind.PERSISTENT:
        out = with_launch(out, launch, replace(launch, grid=replace(launch.grid, kind=n.GridKind.PERSISTENT)))
    # Each hoist removes one let from the loop, so there are at most as many hoists as statements.
    for _ in range(sum(1 for r in main_launch(out).roles for _ in walk_stmts(r.body))):
        hoisted = hoist_reduction(out)
        if hoisted is None:
            break
        out = hoisted
    return out
