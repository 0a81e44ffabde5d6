"""E06xx — backend capability: what a backend cannot express, checked only when lowering to it.

The Triton backend writes plain `triton.language`: one program per CTA with no warp specialization,
no explicit mbarriers, no tensor memory, no TMA copies, no instruction commitments (Triton chooses
the mma instruction) and no grid-wide barrier (`fuse`). Each rule is data (`TRITON_RULES`): the constructs it finds, and the fix.

The CUDA backend expresses every construct; what it refuses is narrower (E061x): tensor-core operands that
are not in shared memory (it reads them with ldmatrix or descriptors, and stages only plain global loads),
and `via dot` on operand types its warp-level form (cake.arch's mma table) does not take. These are the
refusals its codegen would otherwise raise after the checker accepted the schedule. E0616 is where its lowering
would read a let of a shared stage later than the IR's value semantics allow (after the stage's release).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import PINGPONG, PLAIN, derive
from cake.ir.checks.registry import Backend, BadExample, CheckSpec, Family, Finding, check, finding, register
from cake.ir.dot_forms import is_dot
from cake.ir.stage_reads import freeing_barrier, read_only_as_wgmma_a, reads, stage_buffer
from cake.ir.visit import launch_sites

from cake.arch import MmaFamily
from cake.diagnostics import Severity


@dataclass(frozen=True, slots=True)
class Capability:
    """One thing a backend cannot express: where it occurs (node, what) and how to avoid it."""

    id: str
    title: str
    message: str  # over {launch}, {what}
    find: Callable[[CheckContext, n.Launch], Iterator[tuple[object, str]]]
    help: str
    examples: tuple[BadExample, ...]


def _specialized(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    if len(launch.roles) > 1:
        yield launch.roles[1], f"{len(launch.roles)} roles"
    for role in launch.roles:
        if role.replicas is not None:
            yield role.replicas, f"replicated role `{role.name}`"
    for pp in launch.pingpongs:
        yield pp, "pingpong"


def _barriers(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    tma_fed = {an.ref_name(site.stmt.signals) for _r, site in launch_sites(launch)
               if isinstance(site.stmt, n.Copy) and site.stmt.kind is n.CopyKind.TMA}
    for decl in launch.barriers:
        if decl.name not in tma_fed:  # a TMA-fed barrier goes with its copy (E0604), reported once there
            yield decl, f"mbarrier `{decl.name}`"
    for _role, site in launch_sites(launch):
        if isinstance(site.stmt, n.NamedBarrierSync):
            yield site.stmt, "named barrier"


def _tmem(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    for decl in launch.tmem:
        yield decl, f"tensor memory `{decl.name}`"
    for _role, site in launch_sites(launch):
        if isinstance(site.stmt, n.MmaAsync):
            yield site.stmt, "asynchronous mma into tensor memory"


def _tma(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    for _role, site in launch_sites(launch):
        if isinstance(site.stmt, n.Copy) and site.stmt.kind is n.CopyKind.TMA:
            yield site.stmt, "TMA copy"


def _forms(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    for info in ctx.typing.mmas:
        if info.launch is launch and not is_dot(info.form):
            yield info.node, f"`via {info.form}`"


def _fusions(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    fusion = ctx.kernel.fused_into(launch.name)
    if fusion is not None:
        yield fusion, f"the grid-wide barrier of `fuse {fusion.launch} into {fusion.into}`"


def _clusters(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    if launch.cluster is not None:
        yield launch.cluster, f"a cluster of CTAs along `{launch.cluster.axis}`"


def _defers(ctx: CheckContext, launch: n.Launch) -> Iterator[tuple[object, str]]:
    for defer in launch.defers:
        yield defer, f"the deferred merge of `{', '.join(defer.names)}`"


TRITON_RULES: tuple[Capability, ...] = (
    Capability("E0601", "warp specialization", "Triton cannot express warp specialization in launch `{launch}` ({what})",
               _specialized, "use one role per launch (Triton programs are SPMD); lower to CUDA for roles",
               (derive(PLAIN, ("  store besti -> ids[b, tile*BN : +BN] masked\n}\n",
                               "  store besti -> ids[b, tile*BN : +BN] masked\n}\nrole idle: warps 1 {\n}\n"),
                       backend=Backend.TRITON),)),
    Capability("E0602", "explicit barriers", "Triton cannot express {what} in launch `{launch}`", _barriers,
               "drop explicit barriers: Triton synchronizes its own pipelines",
               (derive(PLAIN, ("grid tile in cdiv(N, BN), b in B\n", "grid tile in cdiv(N, BN), b in B\nmbarrier bar arrivals 1\n"),
                       backend=Backend.TRITON),)),
    Capability("E0603", "tensor memory", "Triton cannot express {what} in launch `{launch}`", _tmem,
               "accumulate in registers: `let acc: f32[...] = mma(a, b, acc) via dot`",
               (derive(PLAIN, ("grid tile in cdiv(N, BN), b in B\n", "grid tile in cdiv(N, BN), b in B\ntmem acc_t: f32[128, 64]\n"),
                       backend=Backend.TRITON, arch="sm_100a"),)),
    Capability("E0604", "TMA copies", "Triton cannot express an explicit {what} in launch `{launch}`", _tma,
               "use `load` (Triton picks the copy mechanism and pipelines it with `pipelined STAGES`)",
               (derive(PLAIN, ("grid tile in cdiv(N, BN), b in B\n",
                               "grid tile in cdiv(N, BN), b in B\nsmem xs: T[BN, 128]\nmbarrier xf arrivals 1 tx BN*128*sizeof(T)\n"),
                       ("  let xt: T[BN, 128] = load x[b, tile*BN : +BN, :] masked other 0\n",
                        "  copy x[b, tile*BN : +BN, :] -> xs via tma masked signals xf\n  wait xf\n  let xt: T[BN, 128] = xs\n"),
                       backend=Backend.TRITON),)),
    Capability("E0606", "grid-wide barrier", "Triton cannot express {what} (launch `{launch}`)", _fusions,
               "drop the `fuse` line: the launches then run one after another",
               (derive(PLAIN, ("tensor ids: out i32[B, N]\ngrid tile in cdiv(N, BN), b in B\n",
                               "tensor ids: out i32[B, N]\nscratch sq: f32[B, K] = 0\nlaunch norms {\n"
                               "grid kt in cdiv(K, 64), b in B\nrole main: warps 4 {\n"
                               "  let cf: f32[64, 128] = cast(load c[b, kt*64 : +64, :] masked other 0, f32)\n"
                               "  store sum(cf * cf, axis=1) -> sq[b, kt*64 : +64] masked\n}\n}\n"
                               "launch assign {\ngrid persistent tile in cdiv(N, BN), b in B\n"),
                        ("  store besti -> ids[b, tile*BN : +BN] masked\n}\n",
                         "  store besti -> ids[b, tile*BN : +BN] masked\n}\n}\nfuse norms into assign\n"),
                        backend=Backend.TRITON),)),
    Capability("E0607", "thread-block clusters", "Triton cannot express {what} in launch `{launch}`", _clusters,
               "drop the `cluster` line (and any multicast); lower to CUDA for clusters",
               (derive(PLAIN, ("grid tile in cdiv(N, BN), b in B\n", "grid tile in cdiv(N, BN), b in B\ncluster tile 2\n"),
                       backend=Backend.TRITON),)),
    Capability("E0608", "deferred merges", "Triton places its own reductions; {what} in launch `{launch}`", _defers,
               "drop the `defer` line (Triton decides where a reduction's threads meet); lower to CUDA to choose",
               (derive(PLAIN, ("  store besti -> ids[b, tile*BN : +BN] masked\n}\n",
                               "  store besti -> ids[b, tile*BN : +BN] masked\n}\ndefer main best, besti\n"),
                       backend=Backend.TRITON),)),
    Capability("E0605", "instruction commitments", "Triton chooses the mma instruction itself; {what} in launch `{launch}`",
               _forms, "write `via dot`",
               (derive(PLAIN, ("via dot", "via mma_sync.m16n8k16"), backend=Backend.TRITON),)),
)


def _as_check(cap: Capability) -> Callable[[CheckContext], Iterable[Finding]]:
    def run(ctx: CheckContext) -> Iterable[Finding]:
        for launch in ctx.kernel.launches:
            for node, what in cap.find(ctx, launch):
                yield finding(node, f"launch `{launch.name}`", f"{what}: not expressible in Triton",
                              help=cap.help, launch=launch.name, what=what)

    return run


for _cap in TRITON_RULES:
    register(CheckSpec(_cap.id, _cap.title, _cap.message, Family.BACKEND, _as_check(_cap), _cap.examples,
                       backend=Backend.TRITON))


# ------------------------------------------------------------------------------------------------- CUDA

# `via dot` on the CUDA backend is its warp-level form (the row of cake.arch's table it emits).
CUDA_DOT_FAMILY = MmaFamily.MMA_SYNC


def _stageable(expr: n.Expr, launch: n.Launch, lets: dict[str, n.Expr], depth: int = 0) -> bool:
    """The CUDA backend can read this operand from shared memory: a shared buffer (stage), or a name bound
    to a plain load of a global tensor (which it stages) or to another such operand."""
    name = an.ref_name(expr)
    if name is None or depth > len(lets):
        return False
    if any(s.name == name for s in launch.smem):
        return True
    value = lets.get(name) if isinstance(expr, n.Name) else None
    if isinstance(value, n.Load):
        source = an.ref_name(value.source)
        return source is not None and all(t.name != source for t in launch.tmem)
    return value is not None and _stageable(value, launch, lets, depth + 1)


@check("E0610", "mma operand the CUDA backend cannot read",
       "the CUDA backend reads mma operand {which} from shared memory; `{operand}` is computed in registers",
       examples=[derive(PLAIN, ("mma(xt, ct.T)", "mma(xt * xt, ct.T)"), backend=Backend.CUDA)],
       backend=Backend.CUDA)
def cuda_mma_operands(ctx: CheckContext) -> Iterable[Finding]:
    from cake.ir.printer import expr as print_expr  # the printer imports no check: no cycle

    for info in ctx.typing.mmas:
        node = info.node
        if not isinstance(node, n.Mma):
            continue  # tcgen05 statements: E0506 already requires shared buffers
        lets = {site.stmt.name: site.stmt.value for site in an.walk_body(info.role.body)
                if isinstance(site.stmt, n.Let)}
        b = node.b.operand if isinstance(node.b, n.Transpose) else node.b
        for which, operand, ok in (("a", node.a, not isinstance(node.a, n.Transpose)), ("b", b, True)):
            if ok and _stageable(operand, info.launch, lets):
                continue
            text = print_expr(operand)
            yield finding(node, f"role `{info.role.name}`", f"operand {which} is not a shared tile",
                          help="store the operand into a `smem` buffer and pass the buffer stage, or lower with "
                               "`--backend triton`" + ("; A is read row-major: pass it untransposed"
                                                       if which == "a" and not ok else ""),
                          which=which, operand=text)


@check("E0611", "`via dot` operand type the CUDA backend lacks",
       "the CUDA backend lowers `via dot` to {form}, which takes {allowed} operands, not {elem}",
       examples=[derive(PLAIN, ("dtype T in {f16, bf16}", "dtype T in {f32}"), backend=Backend.CUDA)],
       backend=Backend.CUDA)
def cuda_dot_dtype(ctx: CheckContext) -> Iterable[Finding]:
    """An error when no dtype the schedule serves can be lowered; a warning when only some cannot (a call
    with one of those is refused when the CUDA backend specializes for it, by this same check)."""
    if ctx.arch is None:
        return
    row = next((f for f in ctx.arch.mma_forms if f.family is CUDA_DOT_FAMILY), None)
    allowed = row.operand_dtypes if row is not None else ()
    for info in ctx.typing.mmas:
        if not is_dot(info.form):
            continue
        elem = info.a_elem
        elems = {elem} if isinstance(elem, n.DType) else \
            {b[elem.name] for b in ctx.dtype_bindings if elem.name in b} if isinstance(elem, n.TypeVar) else set()
        bad = sorted(e.value for e in elems if e.value not in allowed)
        if bad:
            some_ok = len(bad) < len(elems)
            yield finding(info.node, f"role `{info.role.name}`", f"{', '.join(bad)} operands",
                          help=f"cast the operands to {' or '.join(allowed) or '(none)'} (fp32 accumulation is kept), "
                               "or lower with `--backend triton`",
                          severity=Severity.WARNING if some_ok else Severity.ERROR,
                          form=row.name if row is not None else CUDA_DOT_FAMILY.value,
                          allowed=" or ".join(allowed) or "no", elem=" or ".join(bad))


def _role_exprs(launch: n.Launch) -> Iterator[tuple[n.Role, n.Expr]]:
    """Every expression a role of `launch` evaluates, with the role."""
    for role, site in launch_sites(launch):
        for top in an.stmt_exprs(site.stmt):
            for expr in an.walk_expr(top):
                yield role, expr


def _role_calls(kernel: n.Kernel) -> Iterator[tuple[n.Role, n.Call]]:
    """Every call with arguments that a role of any launch evaluates, with the role (the builtin checks)."""
    for launch in kernel.launches:
        for role, expr in _role_exprs(launch):
            if isinstance(expr, n.Call) and expr.args:
                yield role, expr


@check("E0612", "gathered `load` the CUDA backend lacks",
       "the CUDA backend does not lower a `load` gathered by the index tile `{index}`",
       examples=[derive(PLAIN, ("load x[b, tile*BN : +BN, :]", "load x[b, tile*BN + arange(BN), :]"),
                        backend=Backend.CUDA)],
       backend=Backend.CUDA)
def cuda_gather_loads(ctx: CheckContext) -> Iterable[Finding]:
    """A `load` indexed by a tile of indices (a gather) is refused by the CUDA code generator (C0100); stores
    and atomics through an index tile it lowers."""
    from cake.ir.printer import expr as print_expr  # the printer imports no check: no cycle

    for launch in ctx.kernel.launches:
        for role, expr in _role_exprs(launch):
            if not isinstance(expr, n.Load) or not isinstance(expr.source, n.Index):
                continue
            for item in expr.source.items:
                if isinstance(item, (n.Slice, n.NewAxis)) or not ctx.typing.shape(item):
                    continue
                yield finding(expr, f"role `{role.name}`", "a gather",
                              help="load a contiguous slice (`start : +size`), or lower with `--backend triton`",
                              index=print_expr(item))


@check("E0613", "reduction the CUDA backend lacks",
       "the CUDA backend reduces rank-2 tiles along an axis; `{name}` here reduces a rank-{rank} tile",
       examples=[derive(PLAIN, ("  store besti -> ids", "  let worst: f32 = max(best, axis=0)\n  store besti -> ids"),
                        backend=Backend.CUDA)],
       backend=Backend.CUDA)
def cuda_reduction_rank(ctx: CheckContext) -> Iterable[Finding]:
    """The CUDA code generator lowers `sum`/`max`/`min`/`argmax`/`argmin` of a rank-2 tile only (C0100)."""
    from cake.ir.builtins import BuiltinKind, builtin

    for role, call in _role_calls(ctx.kernel):
        row = builtin(call.func)
        if row is None or row.kind is not BuiltinKind.REDUCTION:
            continue
        shape = ctx.typing.shape(call.args[0])
        if shape is not None and len(shape) != 2:
            yield finding(call, f"role `{role.name}`", f"a rank-{len(shape)} reduction",
                          help="reduce a rank-2 tile (add an axis with `v[None, :]`), or lower with "
                               "`--backend triton`",
                          name=row.name, rank=len(shape))


@check("E0615", "`rank_equal` the CUDA backend lacks",
       "the CUDA backend does not lower `rank_equal` (a tile sort) of `{keys}`",
       examples=[derive(PLAIN, ("  store besti -> ids", "  let r: i32[BN] = rank_equal(besti, axis=0)\n  store r -> ids"),
                        backend=Backend.CUDA)],
       backend=Backend.CUDA)
def cuda_rank_equal(ctx: CheckContext) -> Iterable[Finding]:
    """`rank_equal` sorts a tile; the CUDA code generator has no tile sort and refuses it (C0100)."""
    from cake.ir.printer import expr as print_expr  # the printer imports no check: no cycle

    for role, call in _role_calls(ctx.kernel):
        if call.func == "rank_equal":
            yield finding(call, f"role `{role.name}`", "a tile sort",
                          help="lower with `--backend triton`, or rank by the quadratic form "
                               "`sum(cast(k[:, None] == k[None, :] & tril(n, diagonal=-1), i32), axis=1)`",
                          keys=print_expr(call.args[0]))


@check("E0616", "stage read after its release",
       "the CUDA backend reads `{name}` (a let of the shared stage `{stage}`) where it is used; `arrive {barrier}` "
       "hands the stage back to its producer before such a read",
       examples=[derive(PINGPONG, ("  wait x_full[w]\n  let best", "  wait x_full[w]\n  let xa: T[BN, 128] = xs[w]\n"
                                   "  arrive x_empty[w]\n  let best"),
                        ("mma(xs[w], cs[s].T)", "mma(xa, cs[s].T)"),
                        ("  arrive x_empty[w]\n  store besti",
                         "  let xn: f32[BN] = sum(cast(xa, f32), axis=1)\n  store besti"), backend=Backend.CUDA)],
       backend=Backend.CUDA)
def cuda_stage_read_after_release(ctx: CheckContext) -> Iterable[Finding]:
    """A `let` of a 2-D shared stage is a value in the IR, but the CUDA backend binds it to the stage itself and
    reads it at each use, unless every use is a wgmma's A operand (then it reads the stage once, at the let:
    `cake.ir.stage_reads`). A release of the stage (an `arrive` on the barrier its producer waits on before each
    copy into it) ahead of such a read, or inside a loop that also reads it, lets the producer overwrite what the
    read returns; E0406 sees only reads that name the buffer. Any stage of the buffer counts (conservative).
    1-D lets (`let cn: f32[BK] = csq[s]`) are copied into registers at the let where an mma's layout places them."""
    for launch in ctx.kernel.launches:
        for role in launch.roles:
            sites = list(an.walk_body(role.body))
            for at, site in enumerate(sites):
                let = site.stmt
                decl = stage_buffer(launch, let.value) if isinstance(let, n.Let) else None
                if (decl is None or not isinstance(let, n.Let) or len(decl.type.shape) != 2
                        or read_only_as_wgmma_a(role.body, let.name)):
                    continue
                barrier = freeing_barrier(launch, decl.name)
                uses = [(i, u) for i, u in enumerate(sites) if i > at and reads(u.stmt, let.name)]
                for i, release in enumerate(sites):
                    if (i <= at or barrier is None or not isinstance(release.stmt, n.Arrive)
                            or an.ref_name(release.stmt.barrier) != barrier):
                        continue
                    if any(j > i or _in_one_loop(release, use, site) for j, use in uses):
                        from cake.ir.printer import (
                            expr as print_expr,  # the printer imports no check: no cycle
                        )

                        yield finding(release.stmt, f"role `{role.name}`", f"`{let.name}` is read after this release",
                                      help=f"release `{decl.name}` after the last read of `{let.name}`, or read "
                                           f"`{let.name}` only as a wgmma's A operand (held in registers at the let)",
                                      name=let.name, stage=print_expr(let.value), barrier=print_expr(release.stmt.barrier))
                        break


def _in_one_loop(a: an.StmtSite, b: an.StmtSite, outside: an.StmtSite) -> bool:
    """Whether `a` and `b` share a loop that does not enclose `outside` (a later iteration runs `b` after `a`)."""
    shared = {id(loop) for loop in a.loops} & {id(loop) for loop in b.loops}
    return bool(shared - {id(loop) for loop in outside.loops})


@check("E0614", "mma.sync tile the CUDA backend cannot split over the role's warps",
       "the CUDA backend splits a {rows} x {cols} `{form}` tile over {warps} warps in whole 16 x 16 blocks per warp; "
       "no split exists",
       examples=[derive(PLAIN, ("param BN = 128 in {64, 128}", "param BN = 16 in {16}"),
                        ("param BK = 64 in {32, 64, 128}", "param BK = 32 in {32}"), backend=Backend.CUDA)],
       backend=Backend.CUDA)
def cuda_mma_sync_split(ctx: CheckContext) -> Iterable[Finding]:
    """`via dot` and `mma_sync.*` lower to mma.sync, whose accumulator the backend lays out warp by warp
    (`cake.arch.mma_sync_warp_grid`, the rule its code generator uses): a tile too small for the role's warps
    would otherwise be refused at lowering (C0101) after the checker accepted it."""
    from cake.arch import mma_sync_warp_grid

    for info in ctx.typing.mmas:
        if not isinstance(info.node, n.Mma) or not (is_dot(info.form) or info.form.startswith("mma_sync.")):
            continue
        rows, cols = an.try_value(info.m, ctx.env), an.try_value(info.n_, ctx.env)
        warps = an.try_value_of(lambda env, role=info.role: an.role_threads_per_instance(role, env), ctx.env)
        if rows is None or cols is None or warps is None:
            continue  # decided per specialization, when the params are bound
        warps //= an.THREADS_PER_WARP
        if mma_sync_warp_grid(rows, cols, warps) is None:
            yield finding(info.node, f"role `{info.role.name}`", f"{rows} x {cols} over {warps} warps",
                          help="make the rows a multiple of 16 x warps (or the columns of 16 x warps), use fewer "
                               "warps, or lower with `--backend triton`",
                          rows=rows, cols=cols, warps=warps, form=info.form)
