"""Thread-block clusters and TMA multicast (`cluster AXIS SIZE`, `via tma multicast`, `arrive BAR cluster`).

A cluster's CTAs run one program in lockstep over shared stages: a multicast copy lands one tile in every CTA of
the cluster, each CTA issuing 1/SIZE of it, and a stage may be refilled only once the readers of *every* CTA have
released it. So the checks here are what keeps those CTAs agreeing:

- the target has clusters, the clustered axis is the grid's first (the CUDA backend's cluster dims are x), the
  size is a power of two within the target's portable maximum, and the launch is not fused (E0512, E0513);
- a multicast or cluster-wide arrive has a cluster to act on, and a multicast copy is a TMA copy (E0514);
- nothing whose value differs between a cluster's CTAs decides a multicast's source or a loop's trip count
  (E0414): otherwise the CTAs would fill or release different stages and wait on each other forever;
- the readers of a multicast stage release it in every CTA (`arrive ... cluster`, E0413);
- accesses indexed by the clustered axis are masked, since rounding the grid up to whole clusters gives some CTAs
  an index past the extent (E0206);
- a multicast stage splits into SIZE slices that keep TMA's shared-memory alignment (E0207).

Arrival counts (E0402) count a cluster-wide arrive once per CTA of the cluster (`analysis.arrivals_of`); the
Triton backend's refusal of clusters is E0607, with its other rules (`backend.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import MULTICAST, PINGPONG, PLAIN, derive
from cake.ir.checks.registry import Finding, check, finding
from cake.ir.clusters import copy_guards, first_varying, varying_names
from cake.ir.visit import launch_sites

from cake.arch import Feature

# A multicast slice of a 2-D stage starts on a whole 8-row group: the swizzle atom (8 rows of 32, 64 or 128 B)
# and, unswizzled, TMA's 128-byte shared-memory alignment for rows of at least 16 B [ptx: cp.async.bulk.tensor].
MULTICAST_ROW_GROUP = 8
# A multicast slice of a 1-D stage is a whole number of 16-byte units (bulk copies move 16-byte multiples) [ptx].
MULTICAST_VECTOR_BYTES = 16


def _clustered(ctx: CheckContext) -> Iterator[tuple[n.Launch, n.Cluster]]:
    for launch in ctx.kernel.launches:
        if launch.cluster is not None:
            yield launch, launch.cluster


def _well_formed(ctx: CheckContext) -> Iterator[tuple[n.Launch, n.Cluster]]:
    """The clustered launches E0512 and E0513 accept: the checks of what a cluster's CTAs must agree on are about
    these only (a malformed cluster is reported once, there)."""
    for launch, cluster in _clustered(ctx):
        if not _shape_problems(ctx, launch, cluster) and ctx.arch is not None and ctx.arch.has(Feature.CLUSTER):
            yield launch, cluster


@check("E0512", "clusters unavailable on the target", "launch `{launch}` is clustered; {arch} has no thread-block clusters",
       examples=[derive(PLAIN, ("target sm_90a", "target sm_80"),
                        ("grid tile in cdiv(N, BN), b in B\n", "grid tile in cdiv(N, BN), b in B\ncluster tile 2\n"))])
def cluster_available(ctx: CheckContext) -> Iterable[Finding]:
    if ctx.arch is None or ctx.arch.has(Feature.CLUSTER):
        return
    for launch, cluster in _clustered(ctx):
        yield finding(cluster, f"launch `{launch.name}`", f"no clusters on {ctx.arch.name}",
                      help="target sm_90 or later, or drop the `cluster` line (and multicast)",
                      launch=launch.name, arch=ctx.arch.name)


@check("E0513", "cluster shape", "launch `{launch}`: {why}",
       examples=[derive(MULTICAST, ("cluster tile 2", "cluster b 2")),
                 derive(MULTICAST, ("cluster tile 2", "cluster tile 3"), ("arrivals 4 free", "arrivals 6 free")),
                 derive(MULTICAST, ("cluster tile 2", "cluster tile 16"), ("arrivals 4 free", "arrivals 32 free"))])
def cluster_shape(ctx: CheckContext) -> Iterable[Finding]:
    for launch, cluster in _clustered(ctx):
        for why, fix in _shape_problems(ctx, launch, cluster):
            yield finding(cluster, f"launch `{launch.name}`", why, help=fix, launch=launch.name, why=why)


def _shape_problems(ctx: CheckContext, launch: n.Launch, cluster: n.Cluster) -> list[tuple[str, str]]:
    """(why, fix) for each way the cluster's axis, size or launch is wrong (the size only where E0512 passes)."""
    first = launch.grid.axes[0].var if launch.grid.axes else None
    axes = [a.var for a in launch.grid.axes]
    whys: list[tuple[str, str]] = []
    if cluster.axis not in axes:
        whys.append((f"`{cluster.axis}` is not an axis of its grid ({', '.join(axes)})", f"cluster along `{first}`"))
    elif cluster.axis != first:
        whys.append((f"clusters run along the grid's first axis `{first}`, not `{cluster.axis}`",
                     f"list `{cluster.axis}` first in `grid`, or cluster `{first}`"))
    size = an.try_value(cluster.size, ctx.env)
    if ctx.arch is not None and ctx.arch.has(Feature.CLUSTER) and size is not None:
        most = ctx.arch.cluster_ctas_max
        if size < 1 or size & (size - 1) or size > most:
            whys.append((f"a cluster of {size} CTAs: sizes are powers of two up to {most} on {ctx.arch.name}",
                         f"pick 1, 2, 4 ... {most}"))
    if ctx.kernel.fused_into(launch.name) or ctx.kernel.fused_preludes(launch.name):
        whys.append(("a fused launch is launched cooperatively, and clusters are not combined with that here",
                     "drop the `fuse` line or the `cluster` line"))
    return whys


@check("E0514", "multicast without a cluster", "{what} in launch `{launch}` {why}",
       examples=[derive(MULTICAST, ("cluster tile 2\n", ""), ("arrivals 4 free", "arrivals 2 free"),
                        ("    arrive c_empty[s] cluster\n", "    arrive c_empty[s]\n")),
                 derive(PINGPONG, ("    arrive c_empty[s]\n", "    arrive c_empty[s] cluster\n"))])
def needs_cluster(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        for _role, site in launch_sites(launch):
            stmt = site.stmt
            if isinstance(stmt, n.Copy) and stmt.multicast and stmt.kind is not n.CopyKind.TMA:
                yield finding(stmt, f"launch `{launch.name}`", "not a TMA copy", launch=launch.name,
                              what=f"a `via {stmt.kind.value} multicast` copy", why="cannot multicast",
                              help="write `via tma multicast` (only the TMA unit multicasts)")
            elif launch.cluster is None and ((isinstance(stmt, n.Copy) and stmt.multicast)
                                             or (isinstance(stmt, n.Arrive) and stmt.cluster)):
                what = "a multicast copy" if isinstance(stmt, n.Copy) else "a cluster-wide arrive"
                yield finding(stmt, f"launch `{launch.name}`", "no `cluster` in this launch", launch=launch.name,
                              what=what, why="has no cluster to act on",
                              help=f"declare `cluster {launch.grid.axes[0].var} SIZE` in the launch, or drop it")


@check("E0413", "multicast stage released in one CTA only",
       "`{barrier}` guards the multicast refill of `{buffer}`, but this arrive releases it only in its own CTA",
       examples=[derive(MULTICAST, ("    arrive c_empty[s] cluster\n", "    arrive c_empty[s]\n"),
                        ("arrivals 4 free", "arrivals 2 free"))])
def multicast_release(ctx: CheckContext) -> Iterable[Finding]:
    for launch, _cluster in _well_formed(ctx):
        guards = dict(_multicast_guards(launch))
        for _role, site in launch_sites(launch):
            stmt = site.stmt
            name = an.ref_name(stmt.barrier) if isinstance(stmt, n.Arrive) else None
            if isinstance(stmt, n.Arrive) and not stmt.cluster and name in guards:
                yield finding(stmt, f"mbarrier `{name}`", "released in this CTA only",
                              help=f"write `arrive {name}[...] cluster`: a peer CTA's producer refills "
                                   f"`{guards[name]}` here too, and must wait for these readers",
                              barrier=name, buffer=guards[name])


def _multicast_guards(launch: n.Launch) -> Iterator[tuple[str, str]]:
    """(barrier, buffer) for each multicast copy: the barrier its role last waits on before it in its block."""
    for role in launch.roles:
        for copy, barrier in copy_guards(role):
            if copy.multicast:
                yield barrier, an.ref_name(copy.dest) or "?"


@check("E0414", "cluster CTAs that disagree", "{what} depends on `{name}`, which differs between the CTAs of a cluster",
       examples=[derive(MULTICAST, ("copy c[b, k*BK : +BK, :] -> cs[s] via tma multicast",
                                    "copy c[b, tile + k*BK : +BK, :] -> cs[s] via tma multicast")),
                 derive(MULTICAST, ("  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {\n    wait c_full[s]",
                                    "  for k in 0 .. cdiv(K, BK) + tile % 2 pipelined STAGES as s {\n    wait c_full[s]"))])
def cluster_agreement(ctx: CheckContext) -> Iterable[Finding]:
    for launch, cluster in _well_formed(ctx):
        for role in launch.roles:
            varying = varying_names(role, cluster.axis)
            for site in an.walk_body(role.body):
                stmt = site.stmt
                parts: list[tuple[str, object]] = []
                if isinstance(stmt, n.For):
                    parts = [("the trip count of this loop", (stmt.start, stmt.stop))]
                elif isinstance(stmt, n.Copy) and stmt.multicast:
                    parts = [("the source of a multicast copy", stmt.source)]
                for what, node in parts:
                    hit = first_varying(node, varying)
                    if hit is not None:
                        yield finding(stmt, f"role `{role.name}`", f"depends on `{hit}`", what=what, name=hit,
                                      help="every CTA of a cluster must run the same loops and multicast the "
                                           "same tiles; index them by the other grid axes and loop variables")


@check("E0206", "unmasked access along a clustered axis",
       "`{tensor}` is indexed by `{name}`, which may pass its extent in a clustered grid, but the access is not masked",
       examples=[derive(MULTICAST, ("tensor x: in T[B, N, 128]", "tensor x: in T[B, 2048, 128]"),
                        ("grid persistent tile in cdiv(N, 2*BN)", "grid persistent tile in cdiv(2048, 2*BN)"),
                        ("via tma masked signals x_full[w]", "via tma signals x_full[w]"))])
def clustered_masking(ctx: CheckContext) -> Iterable[Finding]:
    for launch, cluster in _well_formed(ctx):
        globals_ = {t.name for t in ctx.kernel.tensors} | {s.name for s in ctx.kernel.scratch}
        for role in launch.roles:
            varying = varying_names(role, cluster.axis)
            for site in an.walk_body(role.body):
                for node, ref, masked in _global_accesses(site.stmt):
                    tensor = an.ref_name(ref)
                    if masked or tensor not in globals_:
                        continue
                    hit = first_varying(ref, varying)
                    if hit is not None:
                        yield finding(node, f"role `{role.name}`", "not masked", tensor=tensor, name=hit,
                                      help=f"add `masked`: the grid along `{cluster.axis}` is rounded up to whole "
                                           "clusters, so the last cluster's CTAs may start past the extent")


def _global_accesses(stmt: n.Stmt) -> Iterator[tuple[object, n.Expr, bool]]:
    """(node, indexed reference, masked) of every access a statement makes to a named buffer."""
    if isinstance(stmt, n.Copy):
        yield stmt, stmt.source, stmt.masked
    elif isinstance(stmt, (n.Store, n.Atomic)):
        yield stmt, stmt.dest, stmt.masked
    for expr in an.stmt_exprs(stmt):
        for sub in an.walk_expr(expr):
            if isinstance(sub, n.Load):
                yield sub, sub.source, sub.masked


@check("E0207", "multicast stage that does not split", "multicast into `{buffer}`: {why}",
       examples=[derive(MULTICAST, ("cluster tile 2", "cluster tile 8"), ("arrivals 4 free", "arrivals 16 free"),
                        ("param BK = 128 in {128, 256}", "param BK = 32 in {32, 128, 256}"),
                        ("wgmma.m64n128k16", "wgmma.m64n32k16"))])
def multicast_slices(ctx: CheckContext) -> Iterable[Finding]:
    for launch, cluster in _well_formed(ctx):
        smem = {s.name: s for s in launch.smem}
        for _role, site in launch_sites(launch):
            stmt = site.stmt
            if not (isinstance(stmt, n.Copy) and stmt.multicast):
                continue
            decl = smem.get(an.ref_name(stmt.dest) or "")
            if decl is None:
                continue
            for env in ctx.budget_envs:
                why = _slice_problem(decl, an.try_value(cluster.size, env), env)
                if why is not None:
                    yield finding(stmt, f"buffer `{decl.name}`", why, buffer=decl.name, why=why,
                                  help="a smaller cluster, or a larger stage")
                    break


def _slice_problem(decl: n.SmemDecl, ctas: int | None, env: an.Env) -> str | None:
    shape = [an.try_value(e, env) for e in decl.type.shape]
    if ctas is None or ctas < 1 or any(s is None for s in shape):
        return None
    if len(shape) >= 2:
        rows = shape[0]
        assert rows is not None
        if rows % (MULTICAST_ROW_GROUP * ctas):
            return (f"its {rows} rows do not split into {ctas} slices of whole {MULTICAST_ROW_GROUP}-row groups "
                    "(the swizzle atom and TMA's shared-memory alignment)")
        return None
    extent = shape[0]
    assert extent is not None
    nbytes = extent * an.elem_bytes(decl.type.elem, env)
    if nbytes % (MULTICAST_VECTOR_BYTES * ctas):
        return f"its {nbytes} bytes do not split into {ctas} slices of whole {MULTICAST_VECTOR_BYTES}-byte units"
    return None
