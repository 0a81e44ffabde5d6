"""Structural operators that call the IR passes of `cake.ir.transforms`: each chooses a site (with the turn's
seeded rng where there is a choice), calls the pass and describes what changed. The passes do the rewriting
and document their preconditions; every number they introduce is a param the parametric operators move.

| operator | pass |
|---|---|
| `specialize` | `tma_producer`: a TMA copy producer feeding a compute consumer |
| `split_consumer` | `split_consumer`: `CONSUMERS` replicas of the mma role, ping-pong where it issues wgmma |
| `warp_specialize` | `warp_specialize`: both, a persistent grid for a ping-pong pair, operand-only reductions hoisted |
| `precompute` | `hoist_reduction`: one operand-only reduction (chosen by the rng) into a launch of its own |
"""

from __future__ import annotations

import random
from dataclasses import replace

from cake.agents.mutations import Mutation, Operator
from cake.ir import nodes as n
from cake.ir.analysis import domain_values
from cake.ir.transforms import apply
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.hoist_reduction import hoist_reduction, hoistable
from cake.ir.transforms.refit_forms import refit_forms
from cake.ir.transforms.sites import main_launch
from cake.ir.transforms.split_consumer import split_consumer as split_consumer_pass
from cake.ir.transforms.tma_producer import fed_tiles, tma_producer
from cake.ir.transforms.warp_specialize import warp_specialize as warp_specialize_pass
from cake.ir.visit import walk_stmts

REDRAW = 0.5  # chance that each param of a warp-specialized child is drawn afresh from its domain


def redraw(kernel: n.Kernel, rng: random.Random) -> n.Kernel:
    """`kernel` with each movable param's default drawn afresh (probability `REDRAW`, uniform over the domain),
    then its wgmma forms refitted and its consumers' registers fitted to the register file."""
    params = []
    for param in kernel.params:
        values = domain_values(kernel, param.name)
        if len(values) > 1 and rng.random() < REDRAW:
            param = replace(param, default=values[rng.randrange(len(values))])
        params.append(param)
    return apply(fit_consumer_regs, apply(refit_forms, replace(kernel, params=tuple(params))))


def _shape(kernel: n.Kernel) -> str:
    """One line on what the structural params start at, for the candidate's description."""
    return ", ".join(f"{p.name}={p.default}" for p in kernel.params
                     if p.name.startswith(("PRODUCER_REGS", "CONSUMER_REGS", "CONSUMERS", "HOIST_WARPS")))


def specialize(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    fed = fed_tiles(kernel)
    out = tma_producer(kernel)
    if out is None:
        return None
    out = redraw(out, rng)
    forms = {s.value.form for r in main_launch(out).roles for s in _lets(r) if isinstance(s.value, n.Mma)}
    return Mutation(out, f"TMA producer feeds {', '.join(fed)} to consumer (mma via {', '.join(sorted(forms))}; "
                         f"{_shape(out)})")


def split_consumer(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    out = split_consumer_pass(kernel)
    if out is None:
        return None
    out = redraw(out, rng)
    pingpong = " ping-pong around mma," if main_launch(out).pingpongs and not main_launch(kernel).pingpongs else ""
    return Mutation(out, f"mma role into replicas,{pingpong} {_shape(out)}")


def warp_specialize(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    out = warp_specialize_pass(kernel)
    if out is None:
        return None
    out = redraw(out, rng)
    return Mutation(out, f"TMA producer, consumer replicas, {len(out.launches) - len(kernel.launches)} reductions "
                         f"hoisted, grid {main_launch(out).grid.kind.value}; {_shape(out)}")


def precompute(kernel: n.Kernel, rng: random.Random) -> Mutation | None:
    sites = hoistable(kernel)
    if not sites:
        return None
    name = sites[rng.randrange(len(sites))]
    out = hoist_reduction(kernel, name)
    return None if out is None else Mutation(out, f"{name} once per operand tile in a launch of its own")


def _lets(role: n.Role) -> list[n.Let]:
    return [s for s in walk_stmts(role.body) if isinstance(s, n.Let)]


SPECIALIZING: dict[str, Operator] = {
    "specialize": specialize,
    "split_consumer": split_consumer,
    "warp_specialize": warp_specialize,
    "precompute": precompute,
}

__all__ = ["SPECIALIZING", "precompute", "specialize", "split_consumer", "warp_specialize"]
