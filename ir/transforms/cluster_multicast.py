"""cluster_multicast: CTAs that read the same tiles run as a thread-block cluster and share each such tile's load.

Tiles a CTA loads by TMA without reference to the grid's first axis (in kmeans assign: the centroid stages, which
every point tile of a batch reads) are the same in neighbouring CTAs along that axis. Clustered along it, those
CTAs take the tile once between them: each issues 1/SIZE of it and the TMA unit writes it into every CTA's shared
memory, so L2 serves each such tile once per cluster rather than once per CTA. Nothing here copies a reference
kernel: the hand-written schedules have no clusters, and the size is a param (`CLUSTER`) whose domain is every
cluster size the target allows (`cake.arch`), for the search to explore.

Precondition: the target has clusters; a launch (not fused) has a TMA copy whose source refers to neither its first
grid axis nor anything computed from it, and no loop of the launch runs a trip count computed from that axis (the
CTAs of a cluster must refill and release the same stages; E0414). Effect on that launch:
- `cluster AXIS CLUSTER`, with `param CLUSTER = 2 in {1, 2, 4, ...}` (the smallest real cluster first);
- each such copy becomes `via tma multicast`;
- each barrier that guards such a copy's refill (the wait before it in its block) is released in every CTA:
  its arrives become `arrive ... cluster` and its arrival count is multiplied by CLUSTER;
- every global access indexed by the axis is masked: the grid is rounded up to whole clusters, so the last
  cluster's CTAs may start past the extent (E0206).
None when no launch qualifies.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.clusters import copy_guards, first_varying, varying_names
from cake.ir.transforms.sites import target_spec
from cake.ir.visit import fresh, identifiers, map_stmts, rewrite, walk_body, with_launch

from cake.arch import Feature

PARAM = "CLUSTER"
FIRST_SIZE = 2  # the smallest cluster that shares anything


def sizes(max_ctas: int) -> tuple[int, ...]:
    """Every cluster size up to the target's portable maximum: 1 (no sharing), 2, 4, ..."""
    out, size = [], 1
    while size <= max_ctas:
        out.append(size)
        size *= 2
    return tuple(out)


def clusterable(kernel: n.Kernel, launch: n.Launch) -> bool:
    return bool(_shared_copies(kernel, launch))


def _shared_copies(kernel: n.Kernel, launch: n.Launch) -> list[n.Copy]:
    """The launch's TMA copies every CTA along its first grid axis makes alike, when the launch may be clustered."""
    spec = target_spec(kernel)
    if spec is None or not spec.has(Feature.CLUSTER) or launch.cluster is not None or not launch.grid.axes:
        return []
    if kernel.fused_into(launch.name) or kernel.fused_preludes(launch.name):
        return []
    axis = launch.grid.axes[0].var
    shared = []
    for role in launch.roles:
        varying = varying_names(role, axis)
        for site in walk_body(role.body):
            stmt = site.stmt
            if isinstance(stmt, n.For) and first_varying((stmt.start, stmt.stop), varying) is not None:
                return []  # the CTAs would run different loops
            if isinstance(stmt, n.Copy) and stmt.kind is n.CopyKind.TMA and stmt.signals is not None \
                    and first_varying(stmt.source, varying) is None:
                shared.append(stmt)
    return shared


def cluster_multicast(kernel: n.Kernel) -> n.Kernel | None:
    launch = next((lc for lc in kernel.launches if clusterable(kernel, lc)), None)
    if launch is None:
        return None
    spec = target_spec(kernel)
    assert spec is not None
    name = fresh(PARAM, set(identifiers(kernel)))
    size = n.Name(name)
    shared = {id(c) for c in _shared_copies(kernel, launch)}
    guards = {barrier for role in launch.roles for copy, barrier in copy_guards(role) if id(copy) in shared}
    axis = launch.grid.axes[0].var
    globals_ = {t.name for t in kernel.tensors} | {s.name for s in kernel.scratch}
    roles = []
    for role in launch.roles:
        varying = varying_names(role, axis)

        def edit(stmt: n.Stmt, varying: frozenset[str] = varying) -> n.Stmt:
            if isinstance(stmt, n.Copy) and id(stmt) in shared:
                stmt = replace(stmt, multicast=True)
            if isinstance(stmt, n.Arrive) and analysis.ref_name(stmt.barrier) in guards:
                stmt = replace(stmt, cluster=True)
            return _masked(stmt, varying, globals_)

        roles.append(replace(role, body=map_stmts(role.body, edit)))
    barriers = tuple(replace(b, arrivals=n.BinOp(n.BinOpKind.MUL, b.arrivals, size)) if b.name in guards else b
                     for b in launch.barriers)
    clustered = replace(launch, roles=tuple(roles), barriers=barriers, cluster=n.Cluster(axis, size))
    param = n.Param(name, FIRST_SIZE, n.ValueSet(sizes(spec.cluster_ctas_max)))
    return with_launch(replace(kernel, params=(*kernel.params, param)), launch, clustered)


def _masked(stmt: n.Stmt, varying: frozenset[str], globals_: set[str]) -> n.Stmt:
    """`stmt` with every access to a global buffer indexed by a varying name masked (loads inside expressions too)."""
    def indexed(ref: n.Expr) -> bool:
        return analysis.ref_name(ref) in globals_ and first_varying(ref, varying) is not None

    if isinstance(stmt, (n.Copy, n.Store, n.Atomic)):
        ref = stmt.source if isinstance(stmt, n.Copy) else stmt.dest
        if not stmt.masked and indexed(ref):
            stmt = replace(stmt, masked=True)
    if isinstance(stmt, n.For):
        return stmt  # its body is mapped statement by statement

    def mask_load(node: object) -> object | None:
        if isinstance(node, n.Load) and not node.masked and indexed(node.source):
            return replace(node, masked=True)
        return None

    return rewrite(stmt, mask_load)
