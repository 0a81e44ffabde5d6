"""ORD gates: reduction rounding, determinism, adversarial summation order."""

from __future__ import annotations

import functools

import torch
from cake.verifier.gates.base import (
    DtypePolicy,
    Gate,
    GateContext,
    boundary_dims,
    cases,
    check_against_reference,
    fits,
    register,
    run_once,
)
from cake.verifier.inputs import Case, Layout, ValueFamily, materialize
from cake.verifier.results import Evidence, GateStatus
from cake.verifier.runner import CaseOutcome, call_kernel
from torch import Tensor

F, L = ValueFamily, Layout
DETERMINISM_RUNS = 5  # the paper's ORD-02: five runs, byte-identical


def long_dims(ctx: GateContext, on_chip: bool = False) -> dict[str, int]:
    """Default dims with the reduction dim at its long value; other dims halved until the case fits.
    `on_chip`: the reduction dim at its `long_on_chip` value, the others from the GPU defaults (halved until
    the case fits): a short-ish reduction needs many rows and choices to expose a low-precision accumulator."""
    contract = ctx.contract
    red = contract.dim(contract.reduction_dim)
    dims = contract.default_dims("cuda") if on_chip else ctx.default_dims()
    dims[red.name] = (red.long_on_chip if on_chip else None) or red.long_value or max(red.boundary_candidates)
    while not fits(ctx, dims):
        others = [n for n in dims if n != red.name and dims[n] > 1]
        if not others:
            break
        largest = max(others, key=lambda n: dims[n])
        dims[largest] = max(1, dims[largest] // 2)
    return dims


def long_reductions(ctx: GateContext) -> list[dict[str, int]]:
    """The long reduction, then (when the reduction dim names one) the long reduction kernels that hold it on
    chip accept: a kernel refusing the first (ShapeNotSupported) is still judged on the second."""
    red = ctx.contract.dim(ctx.contract.reduction_dim)
    return [long_dims(ctx)] + ([long_dims(ctx, on_chip=True)] if red.long_on_chip is not None else [])


def _ord01_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    families = (F.RANDN, F.POSITIVE, F.ADVERSARIAL)
    return cases(ctx, "ORD-01", dtype, [(dims, fam, L.CONTIGUOUS) for dims in long_reductions(ctx) for fam in families])


ORD_01 = register(Gate("ORD-01", "long reductions stay within the eps*sqrt(N)*scale rounding bound",
                       _ord01_plan, check_against_reference,
                       notes=("values: |got - ref| <= coefficient x (eps_out|ref| + eps_fp32 sqrt(N) scale)",
                              "an argmin output (a nearest-centroid assign): the chosen index's fp64 distance exceeds the row "
                              "minimum by at most the rounding bound on the distance gap, coefficient x eps_fp32 x "
                              "sqrt(D) x (|x|^2 + max|c|^2); at D = long_value and at D = long_on_chip (128), "
                              "which a kernel holding the point tile in shared memory accepts")))


def _ord02_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    base = ctx.default_dims()
    return cases(ctx, "ORD-02", dtype, [(base, F.RANDN, L.CONTIGUOUS), (boundary_dims(ctx, "ORD-02", 0), F.RANDN, L.CONTIGUOUS)])


def as_bytes(t: Tensor) -> Tensor:
    return t.detach().contiguous().cpu().reshape(-1).view(torch.uint8)


def first_difference(a: Tensor, b: Tensor) -> int | None:
    """Flat element index of the first byte-level difference, or None when identical."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return 0
    diff = (as_bytes(a) != as_bytes(b)).nonzero()
    return None if diff.numel() == 0 else int(diff[0]) // a.element_size()


def _ord02_check(ctx: GateContext, case: Case) -> CaseOutcome:
    inputs = materialize(ctx.contract, case, ctx.device)
    first = [o.detach().clone() for o in call_kernel(ctx.kernel, inputs, len(ctx.contract.outputs))]
    for run in range(1, DETERMINISM_RUNS):
        again = call_kernel(ctx.kernel, inputs, len(ctx.contract.outputs))
        for spec, a, b in zip(ctx.contract.outputs, first, again, strict=True):
            flat = first_difference(a, b)
            if flat is not None:
                idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
                ga, gb = a.reshape(-1)[flat].item(), b.detach().reshape(-1)[flat].item()
                ev = Evidence(spec.name, idx, gb, ga, abs(float(gb) - float(ga)), 0.0, note=f"run {run} vs run 0")
                return CaseOutcome(GateStatus.FAIL, f"{case.describe()}: run {run} differs from run 0 at "
                                                    f"`{spec.name}`{list(idx)} ({gb} vs {ga})", ev)
    return CaseOutcome(GateStatus.PASS, f"{DETERMINISM_RUNS} runs byte-identical")


ORD_02 = register(Gate("ORD-02", f"{DETERMINISM_RUNS} runs on the same inputs are byte-identical",
                       _ord02_plan, _ord02_check, DtypePolicy.PRIMARY))


def _ord03_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    base = ctx.default_dims()
    return cases(ctx, "ORD-03", dtype, [(base, F.CANCELLATION, L.CONTIGUOUS), (long_dims(ctx), F.CANCELLATION, L.CONTIGUOUS)])


# Against the worst-case (eps * N) bound: an fp32 accumulator in any order stays inside it, while an fp16
# accumulator or a dropped term does not.
ORD_03 = register(Gate("ORD-03", "adversarial summation order [1, 1e-7, -1, 1e-7, ...] within the eps*N bound",
                       _ord03_plan, functools.partial(check_against_reference, worst_case=True)))

__all__ = ["ORD_01", "ORD_02", "ORD_03", "run_once"]
