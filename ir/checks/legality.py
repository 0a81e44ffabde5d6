"""E05xx — hardware legality: what the target's instruction set allows.

Instruction forms are data: `cake.arch`'s mma table (one `MmaForm` row per instruction shape and target:
M/N/K, operand types, where the operands may live, who issues it) is what these checks read, the same table
the CUDA backend generates its wrappers from — a form the checker accepts is a form the backend emits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import CP_ASYNC, PINGPONG, PLAIN, TCGEN05, derive
from cake.ir.checks.registry import Finding, check, finding
from cake.ir.dot_forms import dot_forms_help, dot_precision, is_dot
from cake.ir.types import Elem
from cake.ir.typing import Kind, MmaInfo

from cake.arch import ARCHS, ArchSpec, Feature, Issuer, MmaFamily, MmaForm, OperandMemory, mma_forms_of

_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
# Where the checker's typing says an operand lives -> the table's operand memory.
_MEMORY = {Kind.TILE: OperandMemory.REGISTERS, Kind.SMEM: OperandMemory.SHARED, Kind.TMEM: OperandMemory.TENSOR}
_FAMILIES = {f.value: f for f in MmaFamily}


@dataclass(frozen=True, slots=True)
class Form:
    family: str
    m: int
    n: int
    k: int


def parse_form(form: str) -> Form | str:
    """The form's family and shape, or why it is not a form (`dot` has no shape: Form('dot', 0, 0, 0))."""
    if is_dot(form):
        if dot_precision(form) is None:
            return f"`{form}` is no dot form (known: {dot_forms_help()})"
        return Form("dot", 0, 0, 0)
    family, _, shape = form.partition(".")
    if family not in _FAMILIES:
        return f"unknown instruction family `{family}` (known: dot, {', '.join(_FAMILIES)})"
    match = _SHAPE.fullmatch(shape)
    if match is None:
        return f"`{shape or '(none)'}` is not a shape like m64n128k16"
    return Form(family, int(match[1]), int(match[2]), int(match[3]))


def _values(values: Iterable[int]) -> str:
    """`8, 16, ..., 256` for an arithmetic run, else the values listed."""
    vs = sorted(set(values))
    if len(vs) > 3 and all(b - a == vs[1] - vs[0] for a, b in zip(vs, vs[1:], strict=False)):
        return f"{vs[0]}..{vs[-1]} by {vs[1] - vs[0]}"
    return " or ".join(map(str, vs))


def _shape_problem(form: Form) -> str | None:
    """Why no target's table has this shape of the family (None when one has it)."""
    rows = mma_forms_of(_FAMILIES[form.family])
    if form.m not in {r.m for r in rows}:
        return f"M must be {_values(r.m for r in rows)}, not {form.m}"
    with_m = [r for r in rows if r.m == form.m]
    if form.n not in {r.n for r in with_m}:
        return f"N must be {_values(r.n for r in with_m)}, not {form.n}"
    if form.k not in {r.k for r in with_m}:
        return f"K must be {_values(r.k for r in with_m)}, not {form.k}"
    return None


@cache
def _forms_help() -> str:
    parts = []
    for family in MmaFamily:
        by_m: dict[tuple[int, int], list[int]] = {}
        for r in mma_forms_of(family):
            by_m.setdefault((r.m, r.k), []).append(r.n)
        for (m, k), ns in by_m.items():
            parts.append(f"{family.value}.m{m}n{ns[0]}k{k}" if len(ns) == 1 else
                         f"{family.value}.m{m}nNk{k} (N = {_values(ns)})")
    return ", ".join(parts)


def _row(arch: ArchSpec | None, form: Form) -> MmaForm | None:
    """The target's row for the form; without a target (or one lacking the family), any target's row."""
    name = f"{form.family}.m{form.m}n{form.n}k{form.k}"
    row = arch.mma_form(name) if arch is not None else None
    if row is None:
        row = next((r for r in mma_forms_of(_FAMILIES[form.family]) if r.name == name), None)
    return row


def _mmas(ctx: CheckContext) -> Iterable[tuple[MmaInfo, Form, MmaForm]]:
    for info in ctx.typing.mmas:
        form = parse_form(info.form)
        if isinstance(form, Form) and form.family != "dot" and _shape_problem(form) is None:
            row = _row(ctx.arch, form)
            assert row is not None  # _shape_problem found it in some target's table
            yield info, form, row


def _needs(family: MmaFamily) -> str:
    """The targets whose table has the family, as a reader says it."""
    names = [a.name for a in ARCHS.values() if any(f.family is family for f in a.mma_forms)]
    return names[0] if len(names) == 1 else " / ".join(names)


@check("E0500", "unknown target", "unknown target `{arch}`", examples=[derive(PLAIN, ("target sm_90a", "target sm_75"))])
def unknown_target(ctx: CheckContext) -> Iterable[Finding]:
    if ctx.arch is None:
        from cake.arch import ARCHS

        yield finding(ctx.kernel, "target", f"not one of {', '.join(ARCHS)}",
                      help="resource and legality checks need a known target; use --arch", arch=ctx.arch_name)


@check("E0501", "instruction unavailable on the target", "`{form}` requires {needs}; the target is {arch}",
       examples=[derive(PINGPONG, (", regs 40", ""), (", regs 232", ""), arch="sm_90")])
def instruction_available(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    for info in ctx.typing.mmas:
        form = parse_form(info.form)
        if not isinstance(form, Form) or form.family in ("dot", "tcgen05"):
            continue  # tcgen05 is E0509
        family = _FAMILIES[form.family]
        if not any(f.family is family for f in ctx.arch.mma_forms):
            yield finding(info.node, f"role `{info.role.name}`", f"{family.value} is not on {ctx.arch.name}",
                          help="use `via dot` (the backend picks the instruction) or change the target",
                          form=info.form, needs=_needs(family), arch=ctx.arch.name)


@check("E0502", "warpgroup instruction outside a warpgroup role",
       "`{form}` is issued by a whole warpgroup, but role `{role}` is declared in warps",
       examples=[derive(PINGPONG, ("role consumer[w in 2]: warpgroups 1, regs 232", "role consumer[w in 2]: warps 4, regs 232"))])
def warpgroup_role(ctx: CheckContext) -> Iterable[Finding]:
    for info, _form, row in _mmas(ctx):
        if row.issuer is Issuer.WARPGROUP and info.role.unit is not n.UnitKind.WARPGROUPS:
            yield finding(info.node, f"role `{info.role.name}`", "role is not warpgroup-aligned",
                          help=f"declare `role {info.role.name}: warpgroups N`", form=info.form, role=info.role.name)


@check("E0503", "invalid mma instruction form", "invalid mma form `{form}`: {why}",
       examples=[derive(PINGPONG, ("wgmma.m64n128k16", "wgmma.m64n100k16")),
                 derive(PLAIN, ("via dot", "via dot.tf16x5"))])
def form_shape(ctx: CheckContext) -> Iterable[Finding]:
    for info in ctx.typing.mmas:
        form = parse_form(info.form)
        why = form if isinstance(form, str) else (None if form.family == "dot" else _shape_problem(form))
        if why:
            yield finding(info.node, f"role `{info.role.name}`", why, form=info.form, why=why, help=_forms_help())


@check("E0504", "tile not divisible by the instruction shape",
       "the {dim} tile {tile} is not a multiple of `{form}`'s {dim} = {inst}",
       examples=[derive(PINGPONG, ("wgmma.m64n128k16", "wgmma.m64n256k16"))])
def tile_divisible(ctx: CheckContext) -> Iterable[Finding]:
    step = an.SMEM_COLUMN_STEP_ELEMENTS
    for info, form, _ in _mmas(ctx):
        for dim, extent, inst in (("M", info.m, form.m), ("N", info.n_, form.n), ("K", info.k, form.k)):
            tile = an.try_value(extent, ctx.env)
            if tile is not None and dim == "K":
                tile = -(-tile // step) * step  # operand rows are padded with zeros to whole k-steps
            if tile is not None and tile % inst:
                yield finding(info.node, f"role `{info.role.name}`", f"{dim} tile {tile} % {inst} != 0",
                              help=f"pick a form whose {dim} divides {tile}, or a tile that is a multiple of {inst}",
                              dim=dim, tile=tile, form=info.form, inst=inst)
                break


def _choices(ctx: CheckContext, elem: Elem) -> list[n.DType]:
    if isinstance(elem, n.DType):
        return [elem]
    if isinstance(elem, n.TypeVar):
        return [b[elem.name] for b in ctx.dtype_bindings if elem.name in b]
    return []


@check("E0505", "mma operand type unsupported by the form", "`{form}` does not take {elem} operands",
       examples=[derive(TCGEN05, ("dtype T in {f16, bf16}", "dtype T in {f16, bf16, f32}"))])
def operand_dtype(ctx: CheckContext) -> Iterable[Finding]:
    for info, _form, row in _mmas(ctx):
        for elem in _choices(ctx, info.a_elem):
            if elem.value not in row.operand_dtypes:
                yield finding(info.node, f"role `{info.role.name}`", f"{elem.value} operands",
                              help=f"cast the operands to {' or '.join(row.operand_dtypes)}",
                              form=info.form, elem=elem.value)
                break


@check("E0506", "mma operand in the wrong memory", "`{form}` takes operand {which} from {allowed}, not {got}",
       examples=[derive(PINGPONG, ("    let dot: f32[BN, BK] = mma(xs[w], cs[s].T) via wgmma.m64n128k16",
                                   "    let cr: T[BK, 128] = cs[s]\n"
                                   "    let dot: f32[BN, BK] = mma(xs[w], cr.T) via wgmma.m64n128k16"))])
def operand_memory(ctx: CheckContext) -> Iterable[Finding]:
    for info, _form, row in _mmas(ctx):
        for which, kind, allowed in (("a", info.a_kind, row.a_memory), ("b", info.b_kind, row.b_memory)):
            memory = _MEMORY.get(kind) if kind is not None else None
            if kind is not None and memory not in allowed:
                got = memory.value if memory is not None else ("global memory" if kind is Kind.TENSOR else kind.value)
                where = " or ".join(sorted(a.value for a in allowed))
                yield finding(info.node, f"role `{info.role.name}`", f"operand {which} is in {got}",
                              help=f"pass the shared buffer stage itself (e.g. `cs[s]`) as operand {which}",
                              form=info.form, which=which, allowed=where, got=got)


_COPY_FEATURE = {n.CopyKind.TMA: (Feature.TMA, "sm_90+"), n.CopyKind.CP_ASYNC: (Feature.CP_ASYNC, "sm_80+")}


@check("E0507", "copy mechanism unavailable on the target", "`{kind}` copies need {needs}; the target is {arch}",
       examples=[derive(CP_ASYNC, ("smem xs[STAGES]: f32[BM, BN]", "smem xs[STAGES]: f32[BM, BN]\nmbarrier full[STAGES] arrivals 1 tx BM*BN*4"),
                        ("via cp_async masked", "via tma masked signals full[s]\n    wait full[s]"))])
def copy_available(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    for launch in ctx.kernel.launches:
        for role in launch.roles:
            for site in an.walk_body(role.body):
                stmt = site.stmt
                if isinstance(stmt, n.Copy) and stmt.kind in _COPY_FEATURE:
                    feature, needs = _COPY_FEATURE[stmt.kind]
                    if not ctx.arch.has(feature):
                        yield finding(stmt, f"role `{role.name}`", f"{feature.value} is not on {ctx.arch.name}",
                                      help="use `via cp_async` (sm_80+) or `via load`", kind=stmt.kind.value,
                                      needs=needs, arch=ctx.arch.name)


def _box_row(dims: list[int | None]) -> int:
    """Elements of one TMA box row: a 2-D tile's row is padded to whole k-steps (an.SMEM_COLUMN_STEP_ELEMENTS)."""
    inner = dims[-1]
    assert inner is not None
    step = an.SMEM_COLUMN_STEP_ELEMENTS
    return -(-inner // step) * step if len(dims) == 2 else inner


@check("E0508", "TMA box out of limits", "TMA box of `{buffer}` {why}",
       examples=[derive(PINGPONG, ("smem csq[STAGES]: f32[BK]", "smem csq[STAGES]: f32[BK]\nsmem extra: f32[300]"),
                        ("mbarrier x_empty[2]", "mbarrier e arrivals 1 tx 1200\nmbarrier x_empty[2]"),
                        ("  for w in 0 .. 2 {\n", "  copy csq_g[b, 0 : +300] -> extra via tma masked signals e\n  for w in 0 .. 2 {\n"))])
def tma_box(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    arch = ctx.arch
    for launch in ctx.kernel.launches:
        decls = {s.name: s for s in launch.smem}
        for role in launch.roles:
            for site in an.walk_body(role.body):
                stmt = site.stmt
                if not isinstance(stmt, n.Copy) or stmt.kind is not n.CopyKind.TMA:
                    continue
                decl = decls.get(an.ref_name(stmt.dest) or "")
                if decl is None:
                    continue
                for env in ctx.budget_envs:
                    dims = [an.try_value(e, env) for e in decl.type.shape]
                    try:
                        elem = an.elem_bytes(decl.type.elem, env)
                    except an.Unbound:
                        continue
                    why = ""
                    big = [d for d in dims if d is not None and d > arch.tma_box_dim_max_elements]
                    if big:
                        why = f"has a dim of {big[0]} elements (limit {arch.tma_box_dim_max_elements})"
                    elif dims and dims[-1] is not None and (_box_row(dims) * elem) % arch.tma_alignment_bytes:
                        why = (f"has an inner extent of {_box_row(dims) * elem} bytes "
                               f"(must be a multiple of {arch.tma_alignment_bytes})")
                    if why:
                        yield finding(stmt, f"shared buffer `{decl.name}`", why,
                                      help="split the copy into boxes within the limits", buffer=decl.name, why=why)
                        break


@check("E0509", "tcgen05 / tensor memory unavailable", "{what} requires sm_100a; the target is {arch}",
       examples=[derive(TCGEN05, arch="sm_90a")])
def tcgen05_available(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    if ctx.arch.has(Feature.TCGEN05) and ctx.arch.has(Feature.TMEM):
        return
    for launch in ctx.kernel.launches:
        for decl in launch.tmem:
            yield finding(decl, f"tensor memory `{decl.name}`", f"no tensor memory on {ctx.arch.name}",
                          help="accumulate in registers (`let acc: f32[...] = mma(...)`)",
                          what="tensor memory", arch=ctx.arch.name)
    for info in ctx.typing.mmas:
        if info.form.startswith("tcgen05") or isinstance(info.node, n.MmaAsync):
            yield finding(info.node, f"role `{info.role.name}`", f"no tcgen05 on {ctx.arch.name}",
                          help="use wgmma (sm_90a) or `via dot`", what=f"`{info.form}`", arch=ctx.arch.name)


@check("E0510", "setmaxnreg unavailable", "register budgets on the roles of launch `{launch}` need setmaxnreg, "
       "which {arch} lacks", examples=[derive(PINGPONG, ("via wgmma.m64n128k16", "via dot"), arch="sm_90")])
def setmaxnreg_available(ctx: CheckContext) -> Iterable[Finding]:
    assert ctx.arch is not None
    if ctx.arch.has(Feature.SETMAXNREG):
        return
    for launch in ctx.kernel.launches:
        if an.is_warp_specialized(launch):
            role = next((r for r in launch.roles if r.regs is not None), None)
            if role is not None and role.regs is not None:
                yield finding(role.regs, f"role `{role.name}`", "setmaxnreg is sm_90a / sm_100a only",
                              help="drop `regs` (the compiler splits registers evenly) or target sm_90a",
                              launch=launch.name, arch=ctx.arch.name)


@check("E0511", "register budget on a role that is not warpgroup-aligned",
       "role `{role}` has a register budget but {warps} warps: setmaxnreg applies to whole warpgroups",
       examples=[derive(PINGPONG, ("role producer: warpgroups 1, regs 40", "role producer: warps 1, regs 40"))])
def regs_alignment(ctx: CheckContext) -> Iterable[Finding]:
    for launch in ctx.kernel.launches:
        if not an.is_warp_specialized(launch):
            continue
        for role in launch.roles:
            if role.regs is None or role.unit is n.UnitKind.WARPGROUPS:
                continue
            warps = an.try_value(role.units, ctx.env)
            if warps is not None and warps % an.WARPS_PER_WARPGROUP:
                yield finding(role, f"role `{role.name}`", f"{warps} warps",
                              help="declare `warpgroups 1` (idle warps cost nothing) or drop `regs`",
                              role=role.name, warps=warps)

