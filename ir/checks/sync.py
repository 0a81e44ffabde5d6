"""E04xx — synchronization: barriers, ordering, deadlock.

Everything here reads the barrier sites and the happens-before graph of `cake.ir.analysis` (one per
launch, cached in the context). Roles are expanded into instances (`consumer[0]`, `consumer[1]`), and a
barrier element that depends on a replica variable is resolved per instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import NORM_WARPGROUP, PINGPONG, PRODUCER_NORMS, derive
from cake.ir.checks.registry import Finding, check, finding
from cake.ir.checks.text import expr_text

_RELEASES = (an.SiteKind.ARRIVE, an.SiteKind.SIGNAL)


def _who(role: str, instance: int, launch: n.Launch) -> str:
    r = launch.role(role)
    return f"{role}[{instance}]" if r is not None and r.replicas is not None else role


def _decl(launch: n.Launch, name: str) -> n.MbarrierDecl | None:
    return next((b for b in launch.barriers if b.name == name), None)


@check("E0401", "wait without an arrive", "wait on `{barrier}` in role `{role}`, but nothing arrives on it",
       examples=[derive(PINGPONG, ("mbarrier x_empty[2]", "mbarrier go arrivals 1\nmbarrier x_empty[2]"),
                        ("  wait x_full[w]\n", "  wait go\n  wait x_full[w]\n"))])
def wait_without_arrive(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        sites = ctx.barrier_sites(launch)
        if sites is None:
            continue
        seen: set[tuple[str, str]] = set()
        for w in sites:
            if w.kind != an.SiteKind.WAIT or (w.barrier, w.role) in seen:
                continue
            if any(s.barrier == w.barrier and s.kind in _RELEASES and an.compatible(s.element, w.element)
                   for s in sites):
                continue
            seen.add((w.barrier, w.role))
            yield finding(w.site.stmt, f"mbarrier `{w.barrier}`", "no role arrives on or signals this barrier",
                          help=f"add `arrive {w.barrier}...` in the role that releases it, or a copy that "
                               f"`signals {w.barrier}...`", barrier=w.barrier, role=w.role)


@check("E0402", "mbarrier arrival count mismatch",
       "arrival count of `{barrier}`: declared {declared}, but {actual} arrive per phase",
       examples=[derive(PINGPONG, ("mbarrier c_empty[STAGES] arrivals 2 free", "mbarrier c_empty[STAGES] arrivals 1 free"))])
def arrival_count(ctx: CheckContext) -> Iterable[Finding]:
    env = ctx.identity_envs[0]
    for launch in ctx.kernel.launches:
        sites = ctx.barrier_sites(launch)
        if sites is None:
            continue
        try:
            uses = an.barrier_accounting(launch, env, sites)
        except an.Unbound:
            continue
        for decl in launch.barriers:
            use = uses[decl.name]
            yield from _arrival_mismatch(decl, use)


def _arrival_mismatch(decl: n.MbarrierDecl, use: an.BarrierUse) -> Iterator[Finding]:
    """The first element of the first phase sequence whose arrivals differ from the declared count."""
    for j, arrivals in enumerate(use.sequences):
        for element, actual in enumerate(arrivals):
            if not actual or actual == use.declared_arrivals:
                continue
            where = f"[{element}]" if decl.count is not None and len(set(arrivals)) > 1 else ""
            notes: tuple[str, ...] = (f"arriving instances: {', '.join(use.arrivers)}",)
            if len(use.sequences) > 1:
                notes += (f"in the {_nth(j)} of {len(use.sequences)} phase sequences on this barrier (one per "
                          "loop over it)",)
            yield finding(decl.arrivals, f"mbarrier `{decl.name}{where}`",
                          f"declared {use.declared_arrivals}, {actual} arrive per phase",
                          help=f"declare `arrivals {actual}`", notes=notes,
                          barrier=decl.name + where, declared=use.declared_arrivals, actual=actual)
            return


@check("E0403", "transaction bytes mismatch",
       "transaction bytes of `{barrier}`: declared {declared}, but the TMA copies that signal it move {actual}",
       examples=[derive(PINGPONG, ("tx BK*128*sizeof(T) + BK*4", "tx 128*128*sizeof(T) + BK*4"))])
def tx_bytes(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        sites = ctx.barrier_sites(launch)
        if sites is None:
            continue
        for decl in launch.barriers:
            copies = _tma_copies(sites, decl.name)
            explicit = [s.site.stmt for s in sites if s.barrier == decl.name and s.kind == an.SiteKind.EXPECT_TX]
            if decl.tx is None and not copies:
                continue
            if decl.tx is None:
                yield finding(decl, f"mbarrier `{decl.name}`", "no `tx` bytes declared, but TMA copies signal it",
                              help="declare the bytes a phase receives: `tx BOX_BYTES`",
                              barrier=decl.name, declared="none", actual="bytes")
                continue
            yield from _tx_mismatch(ctx, launch, decl, copies, explicit)


def _tma_copies(sites: tuple[an.BarrierSite, ...], barrier: str) -> list[list[n.Copy]]:
    """Per element class and phase sequence: the TMA copies one phase of the barrier receives."""
    # Instances hitting the same element class in the same sequence add up; distinct element classes, and
    # sequential loops over the ring, are separate phases.
    by_phase: dict[tuple[int | None, int], list[n.Copy]] = {}
    for seqs in an.sequences_by_instance(sites, barrier, (an.SiteKind.SIGNAL,)).values():
        for j, seq_sites in enumerate(seqs):
            for s in seq_sites:
                stmt = s.site.stmt
                if isinstance(stmt, n.Copy) and stmt.kind is n.CopyKind.TMA:
                    by_phase.setdefault((s.element, j), []).append(stmt)
    return list(by_phase.values())


def _tx_mismatch(ctx: CheckContext, launch: n.Launch, decl: n.MbarrierDecl, copies: list[list[n.Copy]],
                 explicit: list[n.Stmt]) -> Iterator[Finding]:
    assert decl.tx is not None
    for env in _tx_envs(ctx):
        try:
            declared = an.value(decl.tx, env)
            delivered = [sum(an.copy_box_bytes(c, launch, env) for c in group) for group in copies] or [0]
        except an.Unbound:
            continue
        announced = [an.try_value(s.bytes, env) for s in explicit if isinstance(s, n.ExpectTx)]
        bad = next((d for d in (*delivered, *[a for a in announced if a is not None]) if d != declared), None)
        if bad is None:
            continue
        at = _describe(ctx, env)
        yield finding(decl.tx, f"mbarrier `{decl.name}`", f"declared {declared:,} bytes, copies move {bad:,}{at}",
                      help="make `tx` the sum of the boxes of the TMA copies that signal this barrier",
                      notes=(f"tx = {expr_text(decl.tx)}",),
                      barrier=decl.name, declared=f"{declared:,}", actual=f"{bad:,}")
        return


def _tx_envs(ctx: CheckContext) -> Iterator[an.Env]:
    """Defaults under each dtype, then each param moved through its domain: tx must match everywhere."""
    samples = an.identity_samples(ctx.kernel, ctx.dims)
    for binding in ctx.dtype_bindings:
        for params in an.param_variations(ctx.kernel):
            for sample in samples:
                yield an.Env({**params, **sample}, binding)


def _describe(ctx: CheckContext, env: an.Env) -> str:
    moved = [f"{p.name} = {env.ints[p.name]}" for p in ctx.kernel.params if env.ints.get(p.name) != p.default]
    moved += [f"{k} = {v.value}" for k, v in env.dtypes.items() if len(ctx.dtype_bindings) > 1]
    return f" at {', '.join(moved)}" if moved else ""


@check("E0404", "deadlock", "deadlock: a circular wait through {cycle}",
       examples=[derive(PINGPONG, ("mbarrier c_empty[STAGES] arrivals 2 free", "mbarrier c_empty[STAGES] arrivals 2"))])
def deadlock(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        hb = ctx.happens_before(launch)
        cycle = None if hb is None else hb.find_cycle()
        if hb is None or cycle is None:
            continue
        graph = hb.core
        steps: list[str] = []
        first: n.Wait | None = None
        for role, instance, path in cycle:
            stmt = graph.nodes[(role, instance, path)]["stmt"]
            if isinstance(stmt, n.Wait):
                first = first or stmt
                steps.append(f"{_who(role, instance, launch)} waits {expr_text(stmt.barrier)}")
        if first is None:
            continue
        barrier = an.ref_name(first.barrier) or "?"
        decl = _decl(launch, barrier)
        yield finding(first, f"mbarrier `{barrier}`", "this wait can never complete",
                      help=(f"if `{barrier}` starts released (a producer's first wait), declare it `free`"
                            if decl is not None and not decl.initially_free else
                            "arrive before waiting on what the other role needs"),
                      notes=(" -> ".join(steps) + " -> (back to the start)",),
                      cycle=" -> ".join(steps))


def _smem_reads(launch: n.Launch, role: n.Role, env: an.Env, smem: set[str]
                ) -> Iterator[tuple[an.StmtSite, str, int | None]]:
    """(site, buffer, element) for every read of a shared buffer by one role instance."""
    for site in an.walk_body(role.body):
        stmt = site.stmt
        if isinstance(stmt, n.Copy):
            continue
        exprs = an.stmt_exprs(stmt)
        if isinstance(stmt, n.MmaAsync):
            exprs = (stmt.a, stmt.b)
        elif isinstance(stmt, n.Store) and _fill_dest(stmt, smem) is not None:
            exprs = (stmt.value,)  # the stage it writes is not read
        bases: set[int] = set()
        for expr in exprs:
            for e in an.walk_expr(expr):
                if isinstance(e, n.Index) and isinstance(e.base, n.Name) and e.base.id in smem:
                    bases.add(id(e.base))
                    yield site, e.base.id, an.try_value(an.ref_stage(e), env)
                elif isinstance(e, n.Name) and e.id in smem and id(e) not in bases:
                    yield site, e.id, None


def _fill_dest(stmt: n.Stmt, smem: set[str]) -> n.Index | n.Name | None:
    """The shared-buffer reference a statement fills: a copy's destination, or a role's `store` into a stage."""
    if isinstance(stmt, n.Copy):
        return stmt.dest
    if isinstance(stmt, n.Store) and an.ref_name(stmt.dest) in smem:
        return stmt.dest
    return None


def _fills(launch: n.Launch, env: an.Env) -> list[tuple[str, int, an.StmtSite, str, int | None]]:
    smem = {s.name for s in launch.smem}
    out = []
    for role in launch.roles:
        for inst, ienv in enumerate(an.role_instances(role, env)):
            for site in an.walk_body(role.body):
                dest = _fill_dest(site.stmt, smem)
                name = None if dest is None else an.ref_name(dest)
                if dest is not None and name is not None:
                    out.append((role.name, inst, site, name, an.try_value(an.ref_stage(dest), ienv)))
    return out


def _waits_between(sites: tuple[an.BarrierSite, ...], role: str, inst: int, barrier: str | None,
                   after: an.Path, before: an.Path) -> bool:
    return any(s.kind == an.SiteKind.WAIT and s.role == role and s.instance == inst and s.barrier == barrier
               and after < s.site.path < before for s in sites)


@check("E0405", "read before the fill is waited on",
       "`{buffer}` is read in role `{role}` before the copy or store that fills it is waited on",
       examples=[derive(PINGPONG, ("  wait x_full[w]\n", "")),
                 derive(PRODUCER_NORMS, ("    wait csq_full[s]\n", "")),
                 derive(PRODUCER_NORMS, ("    store sum(cf * cf, axis=1) -> csq[s]\n    arrive csq_full[s]\n",
                                         "    arrive csq_full[s]\n    store sum(cf * cf, axis=1) -> csq[s]\n"))])
def read_before_fill(ctx: CheckContext) -> Iterable[Finding]:
    env = ctx.identity_envs[0]
    for launch in ctx.kernel.launches:
        smem = {s.name for s in launch.smem}
        if not smem:
            continue
        try:
            fills = _fills(launch, env)
        except an.Unbound:
            continue
        hb = ctx.happens_before(launch)
        sites = ctx.barrier_sites(launch)
        if hb is None or sites is None:
            continue
        reported: set[tuple[str, str]] = set()
        for role in launch.roles:
            for inst, ienv in enumerate(an.role_instances(role, env)):
                for site, buf, element in _smem_reads(launch, role, ienv, smem):
                    if (buf, role.name) in reported:
                        continue
                    candidates = [f for f in fills if f[3] == buf and an.compatible(f[4], element)]
                    if any(_filled(hb, sites, f, role.name, inst, site) for f in candidates):
                        continue
                    reported.add((buf, role.name))
                    stored = any(isinstance(f[2].stmt, n.Store) for f in candidates)
                    why = ("nothing copies or stores into it" if not candidates else
                           "no wait on a barrier its writer arrives on after the store precedes this read" if stored
                           else "no wait on a barrier its copy signals precedes this read")
                    how = (f"`arrive` on a barrier after the store into `{buf}`, and wait on it before reading"
                           if stored else f"wait on the barrier the copy into `{buf}` signals before reading it")
                    yield finding(site.stmt, f"shared buffer `{buf}`", why, help=how,
                                  buffer=buf, role=_who(role.name, inst, launch))


def _filled(hb: an.HappensBefore, sites: tuple[an.BarrierSite, ...],
            fill: tuple[str, int, an.StmtSite, str, int | None], role: str, inst: int, read: an.StmtSite) -> bool:
    f_role, f_inst, f_site, _buf, _el = fill
    copy = f_site.stmt
    if isinstance(copy, n.Store):  # the role's own threads write: done when the statement is
        if (f_role, f_inst) == (role, inst):
            return f_site.path < read.path
        return hb.ordered((f_role, f_inst, f_site.path), (role, inst, read.path))
    assert isinstance(copy, n.Copy)
    if (f_role, f_inst) != (role, inst):
        source, target = (f_role, f_inst, f_site.path), (role, inst, read.path)
        if copy.kind is n.CopyKind.LOAD:
            return hb.ordered(source, target)
        # An async copy's data is there only once its barrier completes: issue order proves nothing.
        core = hb.core
        return any(core.edges[source, w]["kind"] == "sync" and (w == target or hb.ordered(w, target))
                   for w in core.successors(source))
    if f_site.path >= read.path:
        return False
    if copy.kind is n.CopyKind.LOAD:
        return True
    if copy.kind is n.CopyKind.CP_ASYNC and (copy.signals is None and any(
            loop.pipeline is not None for loop in f_site.loops)):
        return True  # the compiler derives cp.async.wait_group from the pipelined loop
    return _waits_between(sites, role, inst, an.ref_name(copy.signals), f_site.path, read.path)


def _reused(copy_site: an.StmtSite, persistent: bool) -> bool:
    """A buffer element is written more than once: a persistent tile loop, or a loop whose variable does
    not pick a distinct element."""
    if persistent:
        return True
    stmt = copy_site.stmt
    assert isinstance(stmt, (n.Copy, n.Store))
    names = {e.id for e in an.walk_expr(stmt.dest) if isinstance(e, n.Name)}
    return any(loop.var not in names for loop in copy_site.loops)


@check("E0406", "stage overwritten while being read",
       "a stage of `{buffer}` is overwritten by role `{writer}` while role `{reader}` may still read it",
       examples=[derive(PINGPONG, ("    wait c_empty[s]\n", "")),
                 derive(PRODUCER_NORMS, ("    let cn: f32[BK] = csq[s]\n    arrive c_empty[s]\n",
                                         "    arrive c_empty[s]\n    let cn: f32[BK] = csq[s]\n")),
                 # The normer reads the stage again after its last release: no chain orders it before the refill.
                 derive(NORM_WARPGROUP, ("    arrive csq_full[s]\n",
                                         "    arrive csq_full[s]\n    let late: f32[BK] = sum(cast(cs[s], f32), axis=1)\n"))])
def overwrite(ctx: CheckContext) -> Iterable[Finding]:
    env = ctx.identity_envs[0]
    for launch in ctx.kernel.launches:
        smem = {s.name for s in launch.smem}
        persistent = launch.grid.kind is n.GridKind.PERSISTENT
        try:
            fills = _fills(launch, env)
        except an.Unbound:
            continue
        sites = ctx.barrier_sites(launch)
        if sites is None:
            continue
        hb = ctx.happens_before(launch)
        frame = None if hb is None else _stage_frame(launch, env, hb)
        carried = [] if hb is None else [(u, v) for u, v, kind in hb.graph.edges(data="kind") if kind == "carried"]
        reported: set[tuple[str, str, str]] = set()
        for role in launch.roles:
            for inst, ienv in enumerate(an.role_instances(role, env)):
                for site, buf, element in _smem_reads(launch, role, ienv, smem):
                    for f_role, f_inst, f_site, f_buf, f_el in fills:
                        if f_buf != buf or (f_role, f_inst) == (role.name, inst) or not an.compatible(f_el, element):
                            continue
                        if not _reused(f_site, persistent) or (buf, role.name, f_role) in reported:
                            continue
                        read, fill = (role.name, inst, site.path), (f_role, f_inst, f_site.path)
                        if _released(sites, read, fill) or (
                                frame is not None and _released_through(frame, carried, read, fill)):
                            continue
                        reported.add((buf, role.name, f_role))
                        yield finding(f_site.stmt, f"shared buffer `{buf}`",
                                      f"refilled without waiting for `{role.name}` to release it",
                                      help=f"wait on an `empty` barrier before this copy, and `arrive` on it in "
                                           f"role `{role.name}` after its last read of `{buf}`",
                                      buffer=buf, writer=f_role, reader=role.name)


def _in_scope(path: an.Path, other: an.Path) -> bool:
    """`path` sits in the block of `other` or in an enclosing one, so it runs once per run of `other`."""
    return path[:-1] == other[:len(path) - 1]


def _released(sites: tuple[an.BarrierSite, ...], read: an.Node, fill: an.Node) -> bool:
    """The reader arrives (after the read) on a barrier the writer waits on (before the fill)."""
    r_role, r_inst, r_path = read
    w_role, w_inst, w_path = fill
    arrives = [s for s in sites if s.kind in _RELEASES and (s.role, s.instance) == (r_role, r_inst)
               and _in_scope(s.site.path, r_path) and s.site.path >= r_path]
    waits = [s for s in sites if s.kind == an.SiteKind.WAIT and (s.role, s.instance) == (w_role, w_inst)
             and _in_scope(s.site.path, w_path) and s.site.path < w_path]
    return any(a.barrier == w.barrier and an.compatible(a.element, w.element) for a in arrives for w in waits)


def _stage_frame(launch: n.Launch, env: an.Env, hb: an.HappensBefore) -> Any:
    """The ordering within one iteration of the pipelined loops: the statements inside a pipelined loop, program
    order only between statements of one loop body, and barrier completions between them. Leaving a loop body
    (to the statement after the loop, or to a wait outside every loop) would join an earlier iteration to a
    later one, so such a path is not a chain through the same stage."""
    import networkx as nx

    inside = {(role.name, inst, site.path)
              for role in launch.roles for inst in range(len(an.role_instances(role, env)))
              for site in an.walk_body(role.body) if any(loop.pipeline is not None for loop in site.loops)}
    frame = nx.DiGraph()
    frame.add_nodes_from(inside)
    frame.add_edges_from((u, v) for u, v, kind in hb.core.edges(data="kind")
                         if u in inside and v in inside and (kind == "sync" or u[2][:-1] == v[2][:-1]))
    return frame


def _released_through(frame: Any, carried: list[tuple[an.Node, an.Node]], read: an.Node, fill: an.Node) -> bool:
    """The read happens before a release into a `free` barrier whose next phase's wait happens before the fill,
    through any chain of roles within one iteration of the pipelined loops. The reader need not release the
    stage itself: a normer's read of `cs[s]` precedes its arrive on `csq_full[s]`, which the consumers wait
    on before they release `c_empty[s]`, which the loader waits on before it refills `cs[s]`. The carried
    edge is the one step from this use of the stage to its next fill."""
    import networkx as nx

    if read not in frame or fill not in frame:
        return False
    return any((read == release or nx.has_path(frame, read, release)) and (wait == fill or nx.has_path(frame, wait, fill))
               for release, wait in carried if release in frame and wait in frame)


@check("E0407", "pingpong needs replicas",
       "pingpong over role `{role}`: {why}",
       examples=[derive(PINGPONG, ("pingpong consumer around mma", "pingpong producer around mma"))])
def pingpong(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        for pp in launch.pingpongs:
            role = launch.role(pp.role)
            if role is None:
                continue  # E0101
            count = 1 if role.replicas is None else an.try_value(role.replicas.count, ctx.env)
            has_mma = any(isinstance(e, n.Mma) for s in an.walk_body(role.body)
                          for x in an.stmt_exprs(s.stmt) for e in an.walk_expr(x)) or any(
                isinstance(s.stmt, n.MmaAsync) for s in an.walk_body(role.body))
            why = ""
            if count is not None and count < 2:
                why = f"it has {count} replica; replicas take turns, so at least 2 are needed"
            elif pp.around != "mma":
                why = f"`around {pp.around}`: replicas alternate around `mma`"
            elif not has_mma:
                why = "the role issues no mma to alternate around"
            if why:
                yield finding(pp, f"role `{pp.role}`", why,
                              help=f"replicate the role: `role {pp.role}[w in 2]: ...`", role=pp.role, why=why)


@check("E0408", "TMA copy without a barrier", "TMA copy into `{buffer}` signals no mbarrier",
       examples=[derive(PINGPONG, ("smem csq[STAGES]: f32[BK]", "smem csq[STAGES]: f32[BK]\nsmem extra: f32[128]"),
                        ("  for w in 0 .. 2 {\n", "  copy csq_g[b, 0 : +128] -> extra via tma masked\n  for w in 0 .. 2 {\n"))])
def tma_signal(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        for role in launch.roles:
            for site in an.walk_body(role.body):
                stmt = site.stmt
                if isinstance(stmt, n.Copy) and stmt.kind is n.CopyKind.TMA and stmt.signals is None:
                    buf = an.ref_name(stmt.dest) or "?"
                    yield finding(stmt, f"shared buffer `{buf}`", "completion of this copy is never observable",
                                  help="add `signals BARRIER` and wait on that barrier before reading", buffer=buf)


@check("E0409", "block barrier in part of a warp-specialized launch",
       "block-wide `sync` in role `{role}` but not in {others}: the other warps never reach it",
       examples=[derive(PINGPONG, ("  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {\n    wait c_empty[s]",
                                   "  sync\n  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {\n    wait c_empty[s]"))])
def partial_sync(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        with_sync = {r.name: next((s.stmt for s in an.walk_body(r.body) if isinstance(s.stmt, n.Sync)), None)
                     for r in launch.roles}
        missing = [name for name, stmt in with_sync.items() if stmt is None]
        if not missing:
            continue
        for name, stmt in with_sync.items():
            if stmt is not None:
                yield finding(stmt, f"role `{name}`", "only some roles reach this barrier",
                              help="use a named barrier among the roles involved: `bar_sync ID threads N`",
                              role=name, others=", ".join(f"`{m}`" for m in missing))


@check("E0410", "named barrier thread count",
       "named barrier {id} expects {threads} threads, but {actual} reach it",
       examples=[derive(PINGPONG, ("  arrive x_empty[w]\n", "  arrive x_empty[w]\n  bar_sync 1 threads 100\n"))])
def named_barrier_threads(ctx: CheckContext) -> Iterable[Finding]:
    env = ctx.env
    for launch in ctx.kernel.launches:
        by_id: dict[int | None, list[tuple[n.NamedBarrierSync, int]]] = {}
        for role in launch.roles:
            threads = an.try_value_of(lambda e, r=role: an.role_replicas(r, e) * an.role_threads_per_instance(r, e),
                                      env)
            seen: set[int | None] = set()
            for site in an.walk_body(role.body):
                if isinstance(site.stmt, n.NamedBarrierSync):
                    bid = an.try_value(site.stmt.barrier_id, env)
                    if bid not in seen and threads is not None:
                        by_id.setdefault(bid, []).append((site.stmt, threads))
                        seen.add(bid)
        for bid, uses in by_id.items():
            if bid is None:
                continue
            actual = sum(t for _s, t in uses)
            for stmt, _t in uses:
                declared = an.try_value(stmt.threads, env)
                if declared is not None and (declared != actual or declared % an.THREADS_PER_WARP):
                    yield finding(stmt.threads, f"named barrier {bid}", f"{declared} declared, {actual} arrive",
                                  help=f"use `threads {actual}` (a multiple of {an.THREADS_PER_WARP})",
                                  id=bid, threads=declared, actual=actual)
                    break


def _repeats(site: an.StmtSite, element: n.Expr | None, persistent: bool, env: an.Env) -> str | None:
    """Why one role instance runs this barrier wait more than once on the same element (None: it runs once):
    a persistent tile loop, a loop whose variable does not pick the element, or a pipelined loop that
    wraps around its stages."""
    if persistent:
        return "once per tile of the persistent grid"
    names = {e.id for e in an.walk_expr(element) if isinstance(e, n.Name)}
    for loop in site.loops:
        if loop.pipeline is not None and loop.pipeline.stage_var in names:
            trips = an.try_value(n.BinOp(n.BinOpKind.SUB, loop.stop, loop.start), env)
            stages = an.try_value(loop.pipeline.stages, env)
            if trips is None or stages is None or trips > stages:
                return f"once per {expr_text(loop.pipeline.stages)} iterations of the loop over `{loop.var}`"
        elif loop.var not in names:
            return f"on every iteration of the loop over `{loop.var}`"
    return None


def _first_phase(sites: tuple[an.BarrierSite, ...], wait: an.BarrierSite, free: bool, persistent: bool,
                 env: an.Env) -> int | None:
    """The phase (0, 1, ...; -1 is a `free` barrier's already-complete one) the first run of `wait` must wait
    for: one past the phases this instance waited for before it. None when an earlier wait repeats (its count
    is not known statically)."""
    earlier = [s for s in sites if s.kind == an.SiteKind.WAIT and (s.role, s.instance) == (wait.role, wait.instance)
               and s.barrier == wait.barrier and s.site.path < wait.site.path and an.compatible(s.element, wait.element)]
    if any(_repeats(s.site, an.ref_stage(s.site.stmt.barrier), persistent, env)  # type: ignore[union-attr]
           for s in earlier):
        return None
    return len(earlier) - (1 if free else 0)


@check("E0411", "wait phase disagrees with the barrier's history",
       "`wait {barrier} phase {phase}` in role `{role}`: {why}",
       examples=[derive(PINGPONG, ("    wait c_empty[s]\n", "    wait c_empty[s] phase 0\n"))])
def explicit_phase(ctx: CheckContext) -> Iterable[Finding]:
    """`try_wait.parity P` returns once the barrier's phase of parity P has completed. The compiler derives P
    for a wait without `phase`; a written one must equal, on every run of the wait, the parity of the phase its
    role is waiting for, or the wait passes before its data lands (a race) or waits one phase too long (a
    hang, when the arrivals it waits for come after it)."""
    env = ctx.identity_envs[0]
    for launch in ctx.kernel.launches:
        sites = ctx.barrier_sites(launch)
        if sites is None:
            continue
        persistent = launch.grid.kind is n.GridKind.PERSISTENT
        reported: set[tuple[str, an.Path]] = set()
        for w in sites:
            stmt = w.site.stmt
            if w.kind != an.SiteKind.WAIT or not isinstance(stmt, n.Wait) or stmt.phase is None:
                continue
            written = an.try_value(stmt.phase, env)
            decl = _decl(launch, w.barrier)
            if written is None or decl is None or (w.role, w.site.path) in reported:
                continue
            free = decl.initially_free
            first = _first_phase(sites, w, free, persistent, env)
            releasers = sorted({_who(s.role, s.instance, launch) for s in sites if s.barrier == w.barrier
                                and s.kind in _RELEASES and an.compatible(s.element, w.element)})
            by = ", ".join(releasers) or "nobody"
            why = help_ = ""
            notes: tuple[str, ...] = ()
            if first is not None and written % 2 != first % 2:
                reported.add((w.role, w.site.path))
                if first == -1:
                    why = (f"`{w.barrier}` is `free`, so the first phase this wait needs is already complete "
                           f"(parity 1); phase {written} waits one phase longer, for a release by {by}")
                    hb = ctx.happens_before(launch)
                    node = (w.role, w.instance, w.site.path)
                    after = [r for r in sites if r.barrier == w.barrier and r.kind in _RELEASES and hb is not None
                             and hb.ordered(node, (r.role, r.instance, r.site.path))]
                    if after:
                        notes = (f"that release ({_who(after[0].role, after[0].instance, launch)}: "
                                 f"{expr_text(after[0].site.stmt.barrier)}) happens after this wait: "  # type: ignore[union-attr]
                                 "the kernel hangs",)
                else:
                    why = (f"it needs phase {first} (parity {first % 2}), the {_nth(first)} completion of "
                           f"`{w.barrier}` by {by}; parity {written % 2} names a neighbouring phase, so the wait "
                           "passes before the arrivals it guards or waits for ones that may never come")
                help_ = "drop `phase`: the compiler derives the phase bit from the barrier's history"
            else:
                repeat = _repeats(w.site, an.ref_stage(stmt.barrier), persistent, env)
                if repeat is None:
                    continue
                reported.add((w.role, w.site.path))
                why = (f"this wait runs more than once on each element ({repeat}) and the parity it must wait "
                       f"for alternates with every completion, but `phase {written}` is fixed")
                help_ = "drop `phase`: the compiler keeps a phase bit per element that flips after every wait"
            yield finding(stmt.phase, f"mbarrier `{w.barrier}`", f"phase {written} disagrees with the arrivals",
                          help=help_, notes=notes, barrier=expr_text(stmt.barrier), phase=written,
                          role=_who(w.role, w.instance, launch), why=why)


def _nth(k: int) -> str:
    return {0: "first", 1: "second", 2: "third"}.get(k, f"{k + 1}th")
