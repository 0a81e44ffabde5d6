"""PRC and EXC gates: per-dtype precision, fp32 accumulation, NaN/Inf positions, subnormals."""

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
    register,
)
from cake.verifier.gates.ordering import long_dims, long_reductions
from cake.verifier.inputs import Case, Layout, ValueFamily

F, L = ValueFamily, Layout


def _prc01_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    base = ctx.default_dims()
    return cases(ctx, "PRC-01", dtype, [(base, F.RANDN, L.CONTIGUOUS), (boundary_dims(ctx, "PRC-01", 0), F.RANDN, L.CONTIGUOUS)])


PRC_01 = register(Gate("PRC-01", "each of fp32/fp16/bf16: output dtype follows the contract, values at that dtype's tolerance",
                       _prc01_plan, check_against_reference))


def _prc02_applies(ctx: GateContext) -> str | None:
    return None if torch.float16 in ctx.dtypes else "fp16 not among the requested dtypes"


def _prc02_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    return cases(ctx, "PRC-02", dtype, [(dims, fam, L.CONTIGUOUS) for dims in long_reductions(ctx)
                                        for fam in (F.POSITIVE, F.RANDN)])


PRC_02 = register(Gate("PRC-02", "fp16 inputs keep an fp32 accumulator (long positive sums)", _prc02_plan,
                       check_against_reference, DtypePolicy.FP16, applies=_prc02_applies,
                       notes=("under the Triton CPU interpreter a single fp16 tl.sum accumulates in fp32 (numpy); "
                              "only a loop-carried fp16 accumulator is visible on CPU: the GPU is authoritative",
                              "an argmin output (a nearest-centroid assign): fp16 points and centroids with positive coordinates "
                              "at a long D (long_value, and long_on_chip = 128 for kernels that hold the tile on "
                              "chip), where x.c ~ 3.3 D: an fp16 accumulator rounds it by ~ulp(3.3 D) per step, "
                              "which reorders centroids whose distances differ by far more than the fp32 rounding "
                              "bound, so the chosen centroid's distance gap exceeds the tolerance")))


def _exc01_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    # The last case plants its specials at fixed corners too, so the verdict on them rests on no seed.
    base = ctx.default_dims()
    return cases(ctx, "EXC-01", dtype, [(base, F.SPECIAL, L.CONTIGUOUS), (boundary_dims(ctx, "EXC-01", 0), F.SPECIAL, L.CONTIGUOUS),
                                        (boundary_dims(ctx, "EXC-01", 1), F.SPECIAL, L.CONTIGUOUS),
                                        (base, F.SPECIAL_CORNERS, L.CONTIGUOUS)])


EXC_01 = register(Gate("EXC-01", "NaN/+-Inf at exactly the reference's positions and signs (tolerance-free)",
                       _exc01_plan, functools.partial(check_against_reference, nonfinite_only=True)))


def _exc02_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    base = ctx.default_dims()
    return cases(ctx, "EXC-02", dtype, [(base, F.SUBNORMAL, L.CONTIGUOUS), (long_dims(ctx), F.SUBNORMAL, L.CONTIGUOUS)])


EXC_02 = register(Gate("EXC-02", "subnormal inputs are not flushed to zero where the reference keeps them",
                       _exc02_plan, check_against_reference))
