"""Judging outputs against the fp64 reference, per output, with the contract's check and tolerance."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from cake.verifier.contracts import Contract, OutputCheck, TensorSpec
from cake.verifier.expected import Expected, expected_from, to_reference_inputs
from cake.verifier.inputs import Case
from cake.verifier.results import Evidence
from cake.verifier.tolerance import ToleranceTable
from torch import Tensor


@dataclass(frozen=True, slots=True)
class Comparison:
    ok: bool
    reason: str
    evidence: Evidence | None = None


OK = Comparison(True, "matches the fp64 reference")


__all__ = ["OK", "Comparison", "compare", "to_reference_inputs"]


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if len(shape) else ()


def compare(contract: Contract, case: Case, inputs: tuple[Tensor | None, ...], outputs: tuple[Tensor, ...],
            table: ToleranceTable | None = None, nonfinite_only: bool = False,
            worst_case: bool = False, expected: Expected | None = None) -> Comparison:
    """`nonfinite_only` (EXC-01) judges only where NaN/Inf appear: tolerance-free positions and signs.
    ARGMIN outputs are always judged in full: their NaN policy is part of the tie rule. `expected` (the
    gates pass the case's, see expected.py) replaces computing the reference from `inputs`."""
    if expected is None:
        expected = expected_from(contract, case, to_reference_inputs(inputs),
                                 [None if t is None else t.dtype for t in inputs], table, worst_case)
    refs, out_dtypes, bounds = expected.refs, expected.out_dtypes, expected.bounds
    for i, (spec, got, want) in enumerate(zip(contract.outputs, outputs, out_dtypes, strict=True)):
        if tuple(got.shape) != tuple(refs[i].shape):
            return Comparison(False, f"output `{spec.name}` has shape {tuple(got.shape)}, expected {tuple(refs[i].shape)}")
        if not contract.accepts_output_dtype(spec, got.dtype, want):
            return Comparison(False, f"output `{spec.name}` has dtype {got.dtype}, the contract requires {want}")
    for i, (spec, check) in enumerate(zip(contract.outputs, contract.output_checks, strict=True)):
        got = outputs[i].detach().to(refs[i].device)
        scores = expected.scores[i]
        if check is OutputCheck.ARGMIN and scores is not None:
            result = _argmin(spec, scores, got, bounds[i])
        elif check is OutputCheck.EXACT:
            result = OK if torch.equal(got.long(), refs[i].long()) else Comparison(False, f"`{spec.name}` differs")
        else:
            result = _close(spec, got, refs[i], out_dtypes[i], bounds[i], nonfinite_only)
        if not result.ok:
            return result
    return OK


def _close(spec: TensorSpec, got: Tensor, ref: Tensor, out_dtype: torch.dtype, bound: Tensor,
           nonfinite_only: bool) -> Comparison:
    got64 = got.double()
    # Overflow into the output dtype is part of the reference's meaning: a correct fp16 kernel gives Inf there.
    ref_out = ref.to(out_dtype).double() if out_dtype.is_floating_point else ref
    special = ~torch.isfinite(ref_out) | ~torch.isfinite(got64)
    same = (torch.isnan(ref_out) & torch.isnan(got64)) | (ref_out == got64)
    bad = special & ~same
    if bool(bad.any()):
        flat = int(bad.reshape(-1).nonzero()[0])
        idx = _index(flat, got.shape)
        g, r = float(got64.reshape(-1)[flat]), float(ref_out.reshape(-1)[flat])
        what = "NaN/Inf where the reference is finite" if math.isfinite(r) else \
            "a finite value or wrong sign where the reference is NaN/Inf"
        return Comparison(False, f"`{spec.name}`{list(idx)}: {what} ({g} vs {r}); {int(bad.sum())} such elements",
                          Evidence(spec.name, idx, g, r, float("inf"), 0.0, note="non-finite mismatch"))
    if nonfinite_only:
        return OK
    finite = ~special
    err = torch.where(finite, (got64 - ref).abs(), torch.zeros_like(got64))
    bound = bound.expand_as(err)
    excess = torch.where(finite, err / bound.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(err))
    if excess.numel() == 0 or float(excess.max()) <= 1.0:
        return OK
    flat = int(excess.reshape(-1).argmax())
    idx = _index(flat, got.shape)
    ev = Evidence(spec.name, idx, float(got64.reshape(-1)[flat]), float(ref.reshape(-1)[flat]),
                  float(err.reshape(-1)[flat]), float(bound.reshape(-1)[flat]))
    count = int((excess > 1.0).sum())
    return Comparison(False, f"`{spec.name}`{list(idx)}: got {ev.got:.9g}, expected {ev.expected:.9g}, "
                             f"error {ev.error:.3g} > tolerance {ev.tolerance:.3g} ({count} of {err.numel()} elements)", ev)


def _argmin(spec: TensorSpec, scores: Tensor, got: Tensor, bound: Tensor) -> Comparison:
    """`scores`: fp64 [..., choices] with NaN already +Inf (never the minimum)."""
    choices = scores.shape[-1]
    ids = got.long()
    outside = (ids < 0) | (ids >= choices)
    if bool(outside.any()):
        flat = int(outside.reshape(-1).nonzero()[0])
        idx = _index(flat, ids.shape)
        return Comparison(False, f"`{spec.name}`{list(idx)} = {int(ids.reshape(-1)[flat])} is outside [0, {choices})",
                          Evidence(spec.name, idx, int(ids.reshape(-1)[flat]), f"[0, {choices})", float("inf"), 0.0))
    best = scores.min(dim=-1).values
    chosen = scores.gather(-1, ids[..., None])[..., 0]
    # A point with no finite distance accepts any id (documented in the contract).
    gap = torch.where(torch.isfinite(best), chosen - best, torch.zeros_like(best))
    gap = gap.nan_to_num(nan=float("inf"))
    bound = bound.expand_as(gap)
    excess = gap / bound.clamp_min(torch.finfo(torch.float64).tiny)
    if excess.numel() == 0 or float(excess.max()) <= 1.0:
        return OK
    flat = int(excess.reshape(-1).argmax())
    idx = _index(flat, ids.shape)
    want = int(scores.reshape(-1, choices)[flat].argmin())
    ev = Evidence(spec.name, idx, int(ids.reshape(-1)[flat]), want, float(gap.reshape(-1)[flat]),
                  float(bound.reshape(-1)[flat]), note="error is the chosen distance minus the minimum")
    return Comparison(False, f"`{spec.name}`{list(idx)} = {ev.got}, nearest is {want}: distance gap "
                             f"{ev.error:.3g} > tolerance {ev.tolerance:.3g}", ev)
