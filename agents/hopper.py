"""Hopper-specific commitments the structural operators make: wgmma instruction forms fitted to their tiles,
register budgets re-split for `setmaxnreg`, and pipelines deep enough for TMA.

A commitment keeps the kernel consistent with itself where the IR would otherwise go stale: a wgmma's N
follows the param that sizes its columns (`refit_forms`), its operands' dtype variables lose f32 (the k16
forms take 16-bit operands only), its row param keeps only multiples of 64, and the roles that issue it are
warpgroups. None of this checks legality — the checker does — but a move that can only produce an illegal
kernel is not proposed.
"""

from __future__ import annotations

from dataclasses import replace

from cake.agents.features import main_launch
from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.analysis import domain_values
from cake.ir.transforms import apply
from cake.ir.transforms.as_warpgroups import regrouped
from cake.ir.transforms.drop_unused_params import drop_unused_params
from cake.ir.transforms.refit_forms import refit_forms, wgmma_n
from cake.ir.visit import map_stmts, with_launch
from cake.ir.visit import walk_stmts as walk

from cake.arch import ARCHS, ArchSpec, Feature, MmaFamily, UnknownArchError, mma_forms_of
from cake.arch import arch as arch_spec

# The instruction shapes are cake.arch's mma table (the checker's and the backend's), read here, not restated.
_WGMMA = mma_forms_of(MmaFamily.WGMMA)
WGMMA_M = _WGMMA[0].m
WGMMA_K = _WGMMA[0].k
WGMMA_DTYPES = tuple(n.DType(d) for d in _WGMMA[0].operand_dtypes)
WGMMA_N_PREFERRED = 128  # the column tile a committed wgmma is widened toward (the ping-pong kernels' n128)
PIPELINE_DEPTH = 4  # stages a new TMA pipeline starts with (CUTLASS's Hopper mainloops run 3-5)


def has_feature(kernel: n.Kernel, feature: Feature) -> bool:
    try:
        return arch_spec(kernel.target).has(feature)
    except UnknownArchError:
        return False


def register_budgets(kernel: n.Kernel) -> tuple[int, ...]:
    """The per-thread register budgets a role may declare on the kernel's target: the counts setmaxnreg
    takes (its range, in steps of the allocation granularity), capped at the per-thread maximum."""
    try:
        spec: ArchSpec = arch_spec(kernel.target)
    except UnknownArchError:
        spec = next(a for a in ARCHS.values() if a.has(Feature.SETMAXNREG))
    step = spec.register_allocation_granularity
    top = min(spec.setmaxnreg_max_registers, spec.registers_per_thread_max)
    return tuple(range(spec.setmaxnreg_min_registers, top // step * step + 1, step))


def mma_sites(launch: n.Launch) -> list[n.Let]:
    return [s for r in launch.roles for s in walk(r.body) if isinstance(s, n.Let) and isinstance(s.value, n.Mma)]


def smem_of(launch: n.Launch, expr: n.Expr) -> n.SmemDecl | None:
    name = analysis.ref_name(expr)
    return next((b for b in launch.smem if b.name == name), None)


def _wgmma_form(kernel: n.Kernel, launch: n.Launch, let: n.Let) -> str | None:
    """The wgmma form for this mma, or None when it cannot be one: operands not both in shared memory (B
    written transposed, K-major, as the backends read it), rows not a multiple of 64, columns not tiled."""
    mma = let.value
    assert isinstance(mma, n.Mma)
    if mma.acc is not None or let.type is None or len(let.type.shape) != 2:
        return None
    if smem_of(launch, mma.a) is None or not (isinstance(mma.b, n.Transpose) and smem_of(launch, mma.b.operand)):
        return None
    env = analysis.default_env(kernel)
    rows, cols = (analysis.try_value(d, env) for d in let.type.shape)
    width = wgmma_n(cols) if cols is not None else None
    if rows is None or rows % WGMMA_M or width is None:
        return None
    return f"wgmma.m{WGMMA_M}n{width}k{WGMMA_K}"


def commit_wgmma(kernel: n.Kernel, only: n.Let | n.Assign | None = None) -> n.Kernel | None:
    """`kernel` with its mma (`only`, else every one that can be) committed to wgmma: the issuing role is
    regrouped into warpgroups and the operands' dtype variables keep only the types wgmma k16 takes.
    None when nothing could be committed (operands in registers, shapes that do not tile, a role whose warp
    count is not a multiple of 4, operands of a fixed 32-bit type)."""
    launch = main_launch(kernel)
    forms: dict[int, str] = {}
    narrowed: set[str] = set()
    for let in mma_sites(launch):
        form = _wgmma_form(kernel, launch, let) if only is None or let is only else None
        if form is None or form == let.value.form:  # type: ignore[attr-defined]
            continue
        mma = let.value
        assert isinstance(mma, n.Mma) and isinstance(mma.b, n.Transpose)
        for buf in (smem_of(launch, mma.a), smem_of(launch, mma.b.operand)):
            assert buf is not None
            if isinstance(buf.type.elem, n.TypeVar):
                narrowed.add(buf.type.elem.name)
            elif buf.type.elem not in WGMMA_DTYPES:
                return None
        forms[id(let)] = form
    if not forms:
        return None
    roles = []
    for role in launch.roles:
        body = map_stmts(role.body, lambda s: replace(s, value=replace(s.value, form=forms[id(s)]))  # type: ignore[arg-type, attr-defined]
                          if id(s) in forms else s)
        if body != role.body:
            grouped = regrouped(role, analysis.default_env(kernel))
            if grouped is None:
                return None
            role = replace(grouped, body=body)
        roles.append(role)
    out = narrow_dtypes(with_launch(kernel, launch, replace(launch, roles=tuple(roles))), narrowed)
    if out is None:
        return None
    return apply(refit_forms, _widen_wgmma_tiles(_wgmma_row_domains(apply(drop_unused_params, out))))


def _wgmma_row_domains(kernel: n.Kernel) -> n.Kernel:
    """A param that alone sizes a wgmma's rows keeps only the multiples of 64 in its (set) domain: the rest
    could never lower, and the search would keep proposing them."""
    for let in mma_sites(main_launch(kernel)):
        if let.type is None or not let.value.form.startswith("wgmma.") or not isinstance(let.type.shape[0], n.Name):  # type: ignore[attr-defined]
            continue
        param = kernel.param(let.type.shape[0].id)
        if param is None or not isinstance(param.domain, n.ValueSet):
            continue
        values = tuple(v for v in param.domain.values if v % WGMMA_M == 0)
        if values and param.default in values and values != param.domain.values:
            narrowed = replace(param, domain=replace(param.domain, values=values))
            kernel = replace(kernel, params=tuple(narrowed if p is param else p for p in kernel.params))
    return kernel


def _widen_wgmma_tiles(kernel: n.Kernel) -> n.Kernel:
    """Move each param that alone sizes a wgmma's column tile to the domain value nearest `WGMMA_N_PREFERRED`
    (a narrow wgmma issues more instructions per byte of operand it reads)."""
    for let in mma_sites(main_launch(kernel)):
        if let.type is None or not let.value.form.startswith("wgmma.") or not isinstance(let.type.shape[-1], n.Name):  # type: ignore[attr-defined]
            continue
        param = kernel.param(let.type.shape[-1].id)
        if param is None:
            continue
        values = domain_values(kernel, param.name)
        best = min(values, key=lambda v: (abs(v - WGMMA_N_PREFERRED), -v))
        if best != param.default:
            kernel = replace(kernel, params=tuple(replace(p, default=best) if p is param else p for p in kernel.params))
    return kernel


def deepen_pipelines(kernel: n.Kernel) -> n.Kernel:
    """Stage params of the main launch's pipelines raised to at least `PIPELINE_DEPTH` where their domains
    allow: an asynchronous copy pipeline needs a few stages in flight to hide the copy latency (a shared-
    memory overflow this causes is an E03xx error the agent's repair steps back down)."""
    params = {p.name for p in kernel.params}
    for stmt in (s for r in main_launch(kernel).roles for s in walk(r.body)):
        if isinstance(stmt, n.For) and stmt.pipeline and isinstance(stmt.pipeline.stages, n.Name):
            name = stmt.pipeline.stages.id
            param = kernel.param(name) if name in params else None
            if param is None or param.default >= PIPELINE_DEPTH:
                continue
            deeper = [v for v in domain_values(kernel, name) if param.default < v <= PIPELINE_DEPTH]
            if deeper:
                kernel = replace(kernel, params=tuple(replace(p, default=deeper[-1]) if p is param else p
                                                      for p in kernel.params))
    return kernel


def issues_mma(role: n.Role) -> bool:
    return any(isinstance(getattr(s, "value", None), n.Mma) for s in walk(role.body))


def issues_wgmma(role: n.Role) -> bool:
    return any(isinstance(s, n.Let) and isinstance(s.value, n.Mma) and s.value.form.startswith("wgmma.")
               for s in walk(role.body))


def consumer_budget(kernel: n.Kernel) -> int | None:
    """The largest budget (from `register_budgets`) the mma roles can all take while the other roles keep theirs:
    the SM's register file shared out on a `setmaxnreg` target. None where that is not how registers are
    given (no setmaxnreg, or a copy role without a declared budget)."""
    launch = main_launch(kernel)
    try:
        spec = arch_spec(kernel.target)
    except UnknownArchError:
        return None
    if not spec.has(Feature.SETMAXNREG):
        return None
    env = analysis.default_env(kernel)
    fixed = mma_threads = 0
    for role in launch.roles:
        threads = analysis.role_replicas(role, env) * analysis.role_threads_per_instance(role, env)
        if issues_mma(role):
            mma_threads += threads
        elif role.regs is None or (regs := analysis.try_value(role.regs, env)) is None:
            return None
        else:
            fixed += threads * regs
    if not mma_threads:
        return None
    share = min((spec.registers_per_sm - fixed) // mma_threads, spec.registers_per_thread_max)
    fitting = [r for r in register_budgets(kernel) if r <= share]
    return fitting[-1] if fitting else None


def fit_consumer_regs(kernel: n.Kernel) -> n.Kernel:
    """The mma roles given `consumer_budget` — what a warp-specialized kernel does with the registers its
    copy warps hand back. `kernel` unchanged where there is no such budget."""
    budget = consumer_budget(kernel)
    if budget is None:
        return kernel
    launch = main_launch(kernel)
    roles = tuple(replace(r, regs=n.IntLit(budget)) if issues_mma(r) else r for r in launch.roles)
    return with_launch(kernel, launch, replace(launch, roles=roles))




def wgmma_partners(launch: n.Launch, name: str) -> set[str]:
    """The shared buffers read as operands by the wgmmas that read `name` (empty when none does)."""
    group: set[str] = set()
    for let in mma_sites(launch):
        mma = let.value
        assert isinstance(mma, n.Mma)
        if not mma.form.startswith("wgmma."):
            continue
        b = mma.b.operand if isinstance(mma.b, n.Transpose) else mma.b
        operands = {x for x in (analysis.ref_name(mma.a), analysis.ref_name(b)) if x is not None}
        if name in operands:
            group |= operands
    return group


def operand_dtype_vars(launch: n.Launch, role: n.Role, mma: n.Mma) -> set[str] | None:
    """The dtype variables the mma's operands are typed with; None when an operand has a fixed type that is
    not 16-bit (or cannot be traced)."""
    lets = {s.name: s for s in walk(role.body) if isinstance(s, n.Let)}
    names: set[str] = set()
    for operand in (mma.a, mma.b):
        inner = operand.operand if isinstance(operand, n.Transpose) else operand
        buf = smem_of(launch, inner)
        let = lets.get(inner.id) if isinstance(inner, n.Name) else None
        tile = buf.type if buf is not None else let.type if let is not None else None
        if tile is None:
            return None
        if isinstance(tile.elem, n.TypeVar):
            names.add(tile.elem.name)
        elif tile.elem not in WGMMA_DTYPES:
            return None
    return names


def narrow_dtypes(kernel: n.Kernel, names: set[str] | None) -> n.Kernel | None:
    """The dtype variables `names` restricted to the 16-bit types a k16 mma takes (None when one has none)."""
    if names is None:
        return None
    dtype_vars = []
    for var in kernel.dtype_vars:
        if var.name in names:
            choices = tuple(c for c in var.choices if c in WGMMA_DTYPES)
            if not choices:
                return None
            var = replace(var, choices=choices)
        dtype_vars.append(var)
    return replace(kernel, dtype_vars=tuple(dtype_vars))
