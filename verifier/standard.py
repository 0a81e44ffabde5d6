"""The KernelBench-style *standard* check, implemented only to be compared against (`cake audit`).

Its definition: one fixed shape (the contract's default dims for the device), a few randn fp32 inputs
(optional inputs left out, as a plain call would; values inside the contract's domains),
`torch.allclose(out, ref, atol=STANDARD_ATOL, rtol=STANDARD_RTOL)`. These constants define the standard
check; they are not tolerances the contract gates use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from cake.verifier.compare import to_reference_inputs
from cake.verifier.contracts import Contract
from cake.verifier.inputs import Layout, ValueFamily, make_case, materialize
from cake.verifier.runner import BadReturn, KernelRaised, call_kernel

STANDARD_ATOL = 1e-2
STANDARD_RTOL = 1e-2
STANDARD_TRIALS = 3
STANDARD_DTYPE = torch.float32
STANDARD_GATE_ID = "STANDARD"


@dataclass(frozen=True, slots=True)
class StandardResult:
    passed: bool
    detail: str


def standard_check(contract: Contract, kernel: Callable[..., object], *, device: str = "cpu", seed: int = 0) -> StandardResult:
    omitted = contract.optional_inputs
    dims = contract.resolve_dims(contract.default_dims(device), omitted)
    for trial in range(STANDARD_TRIALS):
        case = make_case(dims, STANDARD_DTYPE, ValueFamily.RANDN, Layout.CONTIGUOUS, seed, STANDARD_GATE_ID, trial,
                         omitted)
        inputs = materialize(contract, case, device)
        try:
            outputs = call_kernel(kernel, inputs, len(contract.outputs))
        except KernelRaised as raised:
            return StandardResult(False, f"trial {trial}: kernel raised {raised}")
        except BadReturn as bad:
            return StandardResult(False, f"trial {trial}: {bad}")
        refs = contract.reference(*to_reference_inputs(inputs, "cpu"))  # the standard check is host-side
        for spec, got, ref in zip(contract.outputs, outputs, refs, strict=True):
            got64 = got.detach().cpu().double()
            if got64.shape != ref.shape or not torch.allclose(got64, ref.double(), atol=STANDARD_ATOL, rtol=STANDARD_RTOL):
                return StandardResult(False, f"trial {trial}: `{spec.name}` not allclose (atol=rtol={STANDARD_ATOL})")
    return StandardResult(True, f"{STANDARD_TRIALS} randn trials allclose at atol=rtol={STANDARD_ATOL}")
