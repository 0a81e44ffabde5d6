"""commit_wgmma: an mma whose operands are in shared memory committed to a Hopper `wgmma.m64nNk16` form.

Precondition (per mma; `only` picks one, else every one that qualifies): the target has wgmma, the product
has no accumulator operand, A is a shared buffer and B a transposed shared buffer (K-major, as the backends
read it), the rows at the param defaults are a multiple of the form's M and a width of the arch's mma table
tiles the columns, and the operands are 16-bit or typed by dtype variables that keep a 16-bit choice.

Effect: the form is the widest table width that tiles the columns (`refit_forms`); the issuing role becomes
warpgroups (`as_warpgroups`); the operands' dtype variables lose the types k16 does not take
(`narrow_dtypes`); a param that alone sizes the rows keeps only multiples of M in its domain, and one that
alone sizes the columns keeps only values some table width tiles (values no form exists for would be
proposed and refused forever). Defaults are never moved: which tile is fastest is the search's question.
Params the rewrite leaves unused are dropped. None when nothing could be committed.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms import apply
from cake.ir.transforms.as_warpgroups import regrouped
from cake.ir.transforms.drop_unused_params import drop_unused_params
from cake.ir.transforms.narrow_dtypes import K16_DTYPES, narrow_dtypes
from cake.ir.transforms.refit_forms import WGMMA_M, refit_forms, wgmma_n
from cake.ir.transforms.sites import has_feature, main_launch, mma_sites, smem_of
from cake.ir.visit import map_stmts, with_launch

from cake.arch import Feature, MmaFamily, mma_forms_of

WGMMA_K = mma_forms_of(MmaFamily.WGMMA)[0].k


def wgmma_form(kernel: n.Kernel, launch: n.Launch, let: n.Let) -> str | None:
    """The wgmma form for this mma, or None when it cannot be one (see the module's precondition)."""
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


def commit_wgmma(kernel: n.Kernel, only: str | None = None) -> n.Kernel | None:
    """`kernel` with its mma (the let named `only`, else every one that can be) committed to wgmma."""
    if not has_feature(kernel, Feature.WGMMA):
        return None
    launch = main_launch(kernel)
    forms: dict[int, str] = {}
    narrowed: set[str] = set()
    for let in mma_sites(launch):
        form = wgmma_form(kernel, launch, let) if only is None or let.name == only else None
        assert isinstance(let.value, n.Mma)
        if form is None or form == let.value.form:
            continue
        mma = let.value
        assert isinstance(mma.b, n.Transpose)
        for buf in (smem_of(launch, mma.a), smem_of(launch, mma.b.operand)):
            assert buf is not None
            if isinstance(buf.type.elem, n.TypeVar):
                narrowed.add(buf.type.elem.name)
            elif buf.type.elem not in K16_DTYPES:
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
    out = with_launch(kernel, launch, replace(launch, roles=tuple(roles)))
    if narrowed:
        out = narrow_dtypes(out, narrowed) or out
        if any(not v.choices or any(c not in K16_DTYPES for c in v.choices)
               for v in out.dtype_vars if v.name in narrowed):
            return None
    out = apply(drop_unused_params, out)
    return apply(refit_forms, _tile_domains(out))


def _narrowed(kernel: n.Kernel, name: str, keep: object) -> n.Kernel:
    param = kernel.param(name)
    if param is None or not isinstance(param.domain, n.ValueSet):
        return kernel
    values = tuple(v for v in param.domain.values if keep(v))  # type: ignore[operator]
    if not values or param.default not in values or values == param.domain.values:
        return kernel
    new = replace(param, domain=replace(param.domain, values=values))
    return replace(kernel, params=tuple(new if p is param else p for p in kernel.params))


def _tile_domains(kernel: n.Kernel) -> n.Kernel:
    """Params that alone size a wgmma's rows keep the multiples of M; those that size its columns keep the
    values a table width tiles."""
    for let in mma_sites(main_launch(kernel)):
        assert isinstance(let.value, n.Mma)
        if let.type is None or not let.value.form.startswith("wgmma."):
            continue
        rows, cols = let.type.shape[0], let.type.shape[-1]
        if isinstance(rows, n.Name):
            kernel = _narrowed(kernel, rows.id, lambda v: v % WGMMA_M == 0)
        if isinstance(cols, n.Name):
            kernel = _narrowed(kernel, cols.id, lambda v: wgmma_n(v) is not None)
    return kernel
