"""CMP gates: values against the fp64 reference over random, adversarial and polymorphic inputs."""

from __future__ import annotations

from dataclasses import replace

import torch
from cake.verifier.gates.base import (
    DimsProfile,
    Gate,
    GateContext,
    boundary_dims,
    cases,
    check_against_reference,
    generator,
    register,
    run_once,
    shrink_to_fit,
)
from cake.verifier.inputs import Case, Layout, ValueFamily, make_case, materialize
from cake.verifier.results import Evidence, GateStatus
from cake.verifier.runner import CaseOutcome, call_kernel

F, L = ValueFamily, Layout


def _cmp01_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    base = ctx.default_dims()
    specs = [(base, F.RANDN, L.CONTIGUOUS), (base, F.ADVERSARIAL, L.CONTIGUOUS)]
    for i in range(3):
        specs.append((boundary_dims(ctx, "CMP-01", i), F.RANDN if i % 2 == 0 else F.ADVERSARIAL, L.CONTIGUOUS))
    if ctx.contract.structure is not None:
        specs += [(base, F.STRUCTURED, L.CONTIGUOUS), (boundary_dims(ctx, "CMP-01", 3), F.STRUCTURED, L.CONTIGUOUS)]
    planned = cases(ctx, "CMP-01", dtype, specs)
    if ctx.profile is DimsProfile.GPU:  # last, so the indices above name the same cases on every profile
        planned += [replace(make_case(dict(dims), dtype, F.RANDN, L.CONTIGUOUS, ctx.seed, "CMP-01", len(planned) + i),
                            sampled=ctx.contract.row_dim is not None)
                    for i, dims in enumerate(ctx.contract.gpu_cases)]
    return planned


CMP_01 = register(Gate("CMP-01", "random and adversarial inputs (0, 1e6, 1e-6, offsets, mixed scales)",
                       _cmp01_plan, check_against_reference,
                       notes=("under the GPU profile also the contract's gpu_cases (e.g. a persistent grid with several "
                              "tiles per CTA), judged on sampled rows when the contract names a row_dim",)))


def _cmp03_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    """Each dim varied alone through its boundary candidates (1, the largest that fits, one seeded pick),
    then every non-contiguous layout."""
    base = ctx.default_dims()
    specs: list[tuple[dict[str, int], ValueFamily, Layout]] = []
    for dim in ctx.contract.dims:
        fitting = [v for v in dim.boundary_candidates if shrink_to_fit(ctx, {**base, dim.name: v})[dim.name] == v]
        gen = generator(ctx.seed, "CMP-03", len(specs), salt=f":{dim.name}")
        picks = {fitting[0], fitting[-1], fitting[int(torch.randint(0, len(fitting), (1,), generator=gen))]}
        specs += [({**base, dim.name: v}, F.RANDN, L.CONTIGUOUS) for v in sorted(picks)]
    for layout in (L.TRANSPOSED, L.SLICED, L.STRIDED):
        specs.append((base, F.RANDN, layout))
        specs.append((boundary_dims(ctx, "CMP-03", len(specs)), F.RANDN, layout))
    return cases(ctx, "CMP-03", dtype, specs)


CMP_03 = register(Gate("CMP-03", "shape and layout polymorphism (dims varied independently; strided views)",
                       _cmp03_plan, check_against_reference))


def _cmp02_applies(ctx: GateContext) -> str | None:
    return None if ctx.contract.has_backward else f"`{ctx.contract.name}` has no backward in its contract"


def _cmp02_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    base = ctx.default_dims()
    return cases(ctx, "CMP-02", dtype, [(base, F.RANDN, L.CONTIGUOUS), (boundary_dims(ctx, "CMP-02", 0), F.RANDN, L.CONTIGUOUS)])


def _cmp02_check(ctx: GateContext, case: Case) -> CaseOutcome:
    """Gradients of <outputs, g> for a seeded g, against fp64 autograd through the reference."""
    inputs = materialize(ctx.contract, case, ctx.device)
    leaves = tuple(t.detach().requires_grad_(t.is_floating_point()) if t is not None else None for t in inputs)
    outputs = call_kernel(ctx.kernel, leaves, len(ctx.contract.outputs))
    gen = generator(case.seed, case.gate_id, case.case_index, salt=":grad")
    cotangents = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in outputs]
    wrt = [t for t in leaves if t is not None and t.requires_grad]
    got = torch.autograd.grad([o.double().cpu() for o in outputs], wrt, [c for c in cotangents], allow_unused=True)
    ref_leaves = [t.detach().cpu().double().requires_grad_() for t in wrt]
    it = iter(ref_leaves)
    ref_inputs = [next(it) if t is not None and t.requires_grad else t for t in leaves]
    refs = ctx.contract.reference(*ref_inputs)
    want = torch.autograd.grad(list(refs), ref_leaves, cotangents, allow_unused=True)
    coefficient = ctx.contract.tolerance.coefficient(ctx.contract.name, case.dtype)
    n = max(1, ctx.contract.tolerance.reduction(case.dim_map))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            continue
        g64 = torch.zeros_like(w) if g is None else g.detach().cpu().double()
        scale = w.abs().max().item() if w.numel() else 0.0
        bound = coefficient * (torch.finfo(case.dtype).eps * w.abs() + torch.finfo(torch.float32).eps * n**0.5 * scale)
        err = (g64 - w).abs()
        if bool((err > bound).any()) or not bool(torch.isfinite(g64).all()):
            flat = int((err - bound).reshape(-1).nan_to_num(float("inf")).argmax())
            idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(flat), w.shape))
            name = [s.name for s, t in zip(ctx.contract.inputs, leaves, strict=True) if t is not None and t.requires_grad][i]
            ev = Evidence(f"grad_{name}", idx, float(g64.reshape(-1)[flat]), float(w.reshape(-1)[flat]),
                          float(err.reshape(-1)[flat]), float(bound.reshape(-1)[flat]))
            return CaseOutcome(GateStatus.FAIL, f"{case.describe()}: gradient of `{name}` off at {list(idx)}", ev)
    return CaseOutcome(GateStatus.PASS, "gradients match fp64 autograd")


CMP_02 = register(Gate("CMP-02", "gradients against fp64 autograd of the reference", _cmp02_plan, _cmp02_check,
                       applies=_cmp02_applies))

__all__ = ["CMP_01", "CMP_02", "CMP_03", "run_once"]
