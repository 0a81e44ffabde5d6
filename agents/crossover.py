"""Crossover of two schedules for the same op.

The structure (launches, roles, memory, sync) comes from one parent; the configuration — the defaults
of the params both declare — comes from a random subset of the other's, wherever the value lies inside
the structural parent's domain. Two parents of one family exchange configurations; a new structure
inherits a configuration that worked elsewhere. Committed wgmma forms follow the inherited tiles.
"""

from __future__ import annotations

import random
from dataclasses import replace

from cake.agents.mutations import Mutation, domain_values
from cake.ir import nodes as n
from cake.ir.transforms import apply
from cake.ir.transforms.refit_forms import refit_forms


def crossover(a: n.Kernel, b: n.Kernel, rng: random.Random) -> Mutation | None:
    """A child with `a`'s structure and some of `b`'s param defaults; None when nothing can move."""
    if a.op != b.op:
        return None
    b_defaults = {p.name: p.default for p in b.params}
    movable = [p for p in a.params
               if p.name in b_defaults and b_defaults[p.name] != p.default
               and b_defaults[p.name] in domain_values(a, p.name)]
    if not movable:
        return None
    chosen = [p for p in movable if rng.random() < 0.5] or [rng.choice(movable)]
    names = {p.name for p in chosen}
    params = tuple(replace(p, default=b_defaults[p.name]) if p.name in names else p for p in a.params)
    moved = ", ".join(f"{p.name}={b_defaults[p.name]}" for p in chosen)
    return Mutation(apply(refit_forms, replace(a, params=params)), f"crossover {moved}")
