"""Schedule features: the coordinates of a kernel in the population's behaviour space.

Features are read from the typed kernel with its params at their defaults (the configuration that
runs). They describe *how* a schedule works, not how fast it is, so MAP-Elites keeps one elite per kind
of schedule and the search does not collapse onto one family.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from cake.ir import nodes as n
from cake.ir.analysis import default_env, try_value, walk_body
from cake.ir.stage_reads import held_operands
from cake.ir.transforms.sites import main_launch

_COPY_ORDER = {"none": 0, n.CopyKind.LOAD.value: 1, n.CopyKind.CP_ASYNC.value: 2, n.CopyKind.TMA.value: 3}


@dataclass(frozen=True, slots=True)
class Features:
    grid: str  # tiles | persistent
    copy: str  # the most asynchronous copy mechanism used: none | load | cp_async | tma
    roles: int  # role instances in the main launch (replicas counted)
    pingpong: bool
    stages: int  # deepest software pipeline (1 = not pipelined)
    tile_log2: int  # log2 of the largest mma output tile (elements), 0 when unknown
    warps: int  # warps in the main launch, 0 when unknown
    # an mma operand read once into registers and kept there (`cake.ir.stage_reads.held_operands`); False for
    # candidates stored before this feature existed
    held: bool = False

    def to_json(self) -> dict[str, object]:
        return {"grid": self.grid, "copy": self.copy, "roles": self.roles, "pingpong": self.pingpong,
                "stages": self.stages, "tile_log2": self.tile_log2, "warps": self.warps, "held": self.held}

    def descriptor(self) -> tuple[object, ...]:
        """The MAP-Elites cell: structure first, then coarse buckets of the numbers."""
        stages = min(self.stages, 4)
        return (self.grid, self.copy, self.roles > 1, self.pingpong, self.held, stages, self.tile_log2)


def features_of(kernel: n.Kernel) -> Features:
    launch = main_launch(kernel)
    env = default_env(kernel)
    copies = [s.kind.value for s in _stmts_in(launch) if isinstance(s, n.Copy)]
    copy = max(copies, key=_COPY_ORDER.__getitem__) if copies else "none"
    roles = 0
    warps = 0
    for role in launch.roles:
        count = try_value(role.replicas.count, env) if role.replicas else 1
        units = try_value(role.units, env)
        roles += count or 1
        if count is not None and units is not None:
            warps += count * units * (4 if role.unit is n.UnitKind.WARPGROUPS else 1)
    stages = max((try_value(s.pipeline.stages, env) or 1 for s in _stmts_in(launch)
                  if isinstance(s, n.For) and s.pipeline is not None), default=1)
    tile = 0
    for stmt in _stmts_in(launch):
        if isinstance(stmt, n.Let) and isinstance(stmt.value, n.Mma) and stmt.type is not None:
            sizes = [try_value(d, env) for d in stmt.type.shape]
            if all(s is not None and s > 0 for s in sizes):
                tile = max(tile, int(math.log2(math.prod(s for s in sizes if s is not None))))
    return Features(grid=launch.grid.kind.value, copy=copy, roles=roles, pingpong=bool(launch.pingpongs),
                    stages=stages, tile_log2=tile, warps=warps, held=bool(held_operands(launch)))


def _stmts_in(launch: n.Launch) -> Iterator[n.Stmt]:
    for role in launch.roles:
        yield from (site.stmt for site in walk_body(role.body))


def _exprs_in(launch: n.Launch) -> Iterator[n.Expr]:
    for stmt in _stmts_in(launch):
        value = getattr(stmt, "value", None)
        if value is not None:
            yield value
