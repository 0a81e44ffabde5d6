"""Inputs, shapes and reference comparisons for running lowered schedules against their op's fp64 reference.

Tolerances are test data, defined once here: a CLOSE output must lie within TOLERANCE[dtype] x (1 + |ref|)
of the fp64 reference; an ARGMIN output's chosen score within TOLERANCE[dtype] x the row's score scale of
the row minimum. They are looser than the verifier's calibrated model on purpose: these tests check that
lowering is right, the verifier's gates (run separately) check the contract.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from cake.lowering.runtime import LoadedKernel, load, lower, read_schedule
from cake.verifier.contracts import Contract, OutputCheck, shape_of
from cake.verifier.registry import get_contract

from cake.diagnostics import DiagnosticError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"


def shipped_schedules() -> list[Path]:
    """Shipped schedules whose callable takes the contract's inputs as they are. Schedules a workload adapts to
    its contract (`OpSpec.schedule_loader`: KDA's seeds get a zero initial state and one launch per varlen
    sequence) are lowered, verified and compiled through that adapter by their workload's tests."""
    from cake.experiments.schedules import shipped_schedule_paths
    from cake.experiments.workload import schedule_loader_for
    from cake.lowering.runtime import read_schedule

    return [p for p in shipped_schedule_paths() if schedule_loader_for(read_schedule(p)[0].op) is None]


def fixture_schedules() -> list[Path]:
    return sorted(FIXTURES.glob("*.cake"))


def schedule_id(path: Path) -> str:
    return str(path.relative_to(REPO))


TOLERANCE: dict[torch.dtype, float] = {torch.float32: 1e-4, torch.float16: 2e-2}
BF16_SKIP = "bf16 under Triton's CPU interpreter is computed as raw 16-bit integers (garbage); the GPU verifies bf16"
ODD_DIM_CAP = 70  # the largest boundary candidate used for the "odd shape" case (the interpreter is slow)
CAPABILITY_PREFIX = "E06"  # the checker's backend-capability family


@dataclass(frozen=True, slots=True)
class Lowered:
    """A schedule run through the Triton backend: either loaded, or refused with diagnostics."""

    op: str
    kernel: LoadedKernel | None
    refusal: DiagnosticError | None


def lower_schedule(path: object, params: dict[str, int] | None = None) -> Lowered:
    kernel, text = read_schedule(str(path))
    try:
        lowered = lower(kernel, "triton", params=params, filename=str(path), source_text=text)
    except DiagnosticError as error:
        return Lowered(kernel.op, None, error)
    return Lowered(kernel.op, load(lowered), None)


def schedule_dtypes(path: object) -> tuple[torch.dtype, ...]:
    """The float dtypes a schedule serves: its dtype variable's choices (every float if it has none)."""
    from cake.verifier.tolerance import dtype_from_name

    kernel, _ = read_schedule(str(path))
    names = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
    if not kernel.dtype_vars:
        return (torch.float32, torch.float16, torch.bfloat16)
    return tuple(dtype_from_name(names[c.value]) for c in kernel.dtype_vars[0].choices if c.value in names)


def reference_shapes(contract: Contract) -> list[dict[str, int]]:
    """The CPU default shape, every dim 1, and an odd shape (boundary candidates: primes, non-multiples)."""
    default = contract.default_dims("cpu")
    odd = {d.name: max([c for c in d.boundary_candidates if c <= ODD_DIM_CAP] or [d.default_small])
           for d in contract.dims}
    return [default, {d.name: 1 for d in contract.dims}, odd]


def make_inputs(contract: Contract, dims: dict[str, int], dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for spec in contract.inputs:
        shape = shape_of(spec, dims)  # dims may be expressions (`N+1`)
        if spec.int_range_dim is not None:
            wanted = contract.input_dtype(spec, dtype)
            inputs.append(torch.randint(0, dims[spec.int_range_dim], shape, generator=gen).to(wanted))
        else:
            inputs.append(torch.randn(shape, generator=gen).to(contract.input_dtype(spec, dtype)))
    return inputs


def assert_matches_reference(op: str, inputs: list[torch.Tensor], got: object, dtype: torch.dtype) -> None:
    contract = get_contract(op)
    outputs = got if isinstance(got, tuple) else (got,)
    assert len(outputs) == len(contract.outputs)
    wide = [t.double() if t.is_floating_point() else t for t in inputs]
    refs = contract.reference(*wide)
    tol = TOLERANCE[dtype]
    for spec, check, out, ref in zip(contract.outputs, contract.output_checks, outputs, refs, strict=True):
        assert out.shape == ref.shape, f"{spec.name}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
        if check is OutputCheck.ARGMIN:
            assert contract.scores is not None
            scores = contract.scores(*wide)
            chosen = scores.gather(-1, out.long()[..., None])[..., 0]
            best = scores.min(dim=-1).values
            scale = scores.abs().amax(dim=-1)
            excess = ((chosen - best) / (1 + scale)).max().item()
            assert excess <= tol, f"{spec.name}: chosen score above the minimum by {excess:.3g} x scale"
        else:
            err = ((out.double() - ref).abs() / (1 + ref.abs())).max().item() if out.numel() else 0.0
            assert err <= tol, f"{spec.name}: relative error {err:.3g} > {tol:g} ({dtype})"


def run_against_reference(lowered: Lowered, dtype: torch.dtype,
                          call: Callable[..., object] | None = None) -> int:
    """Run every test shape; returns how many ran."""
    assert lowered.kernel is not None
    contract = get_contract(lowered.op)
    shapes = reference_shapes(contract)
    for index, dims in enumerate(shapes):
        inputs = make_inputs(contract, dims, dtype, seed=index)
        got = (call or lowered.kernel)(*inputs)
        assert_matches_reference(lowered.op, inputs, got, dtype)
    return len(shapes)
