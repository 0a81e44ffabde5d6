"""The case runner: the one boundary where a kernel's exceptions are caught.

`call_kernel` is the only place the verifier calls user code. What the kernel raises becomes a
`KernelRaised` carrying its type and message; `run_case` turns that into a RUNTIME_ERROR outcome. A kernel
that raises `cake.errors.ShapeNotSupported` refuses the case: `run_case` returns a refused outcome (the case
is not judged; the battery records the shape and the reason). Nothing
else is caught anywhere in the verifier, so a bug in the verifier itself surfaces as a crash, never as a
verdict, and a crash in a kernel is never a pass.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from cake.verifier.results import Evidence, GateStatus
from torch import Tensor

from cake.errors import ShapeNotSupported

# What a kernel may raise while running (RecursionError and torch's OutOfMemoryError are RuntimeErrors).
# Triton's own errors are added at call time when Triton is loaded: importing it here would fix
# TRITON_INTERPRET before a worker can set it.
_KERNEL_ERRORS: tuple[type[BaseException], ...] = (
    RuntimeError, ValueError, TypeError, LookupError, AttributeError, AssertionError, ArithmeticError,
    NameError, ImportError, OSError,
)


def kernel_errors() -> tuple[type[BaseException], ...]:
    triton_errors = sys.modules.get("triton.errors")
    extra = (triton_errors.TritonError,) if triton_errors is not None else ()
    return _KERNEL_ERRORS + extra


class KernelRaised(Exception):
    """The kernel under test raised; `__cause__` is the original exception."""

    def __init__(self, exc: BaseException):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc_type = type(exc).__name__


class KernelRefused(Exception):
    """The kernel raised ShapeNotSupported: it cannot run this case's shapes (`reason` says why)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class BadReturn(Exception):
    """The kernel returned something that is not the contract's outputs (a FAIL, not a crash)."""


def call_kernel(kernel: Callable[..., object], inputs: tuple[Tensor | None, ...], n_outputs: int) -> tuple[Tensor, ...]:
    try:
        result = kernel(*inputs)
    except ShapeNotSupported as refusal:
        raise KernelRefused(refusal.reason) from refusal
    except kernel_errors() as exc:
        raise KernelRaised(exc) from exc
    outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(outputs) != n_outputs or not all(isinstance(t, Tensor) for t in outputs):
        kinds = ", ".join(type(t).__name__ for t in outputs)
        raise BadReturn(f"kernel returned ({kinds}); the contract has {n_outputs} tensor output(s)")
    return outputs  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    status: GateStatus
    reason: str
    evidence: Evidence | None = None
    refused: bool = False  # the kernel refused the case's shape: not run, not judged (status SKIP)


def run_case(check: Callable[[], CaseOutcome]) -> CaseOutcome:
    """Run one gate check on one case; kernel exceptions and bad returns become outcomes here, only here."""
    try:
        return check()
    except KernelRefused as refusal:
        return CaseOutcome(GateStatus.SKIP, refusal.reason, refused=True)
    except KernelRaised as raised:
        return CaseOutcome(GateStatus.RUNTIME_ERROR, f"kernel raised {raised}")
    except BadReturn as bad:
        return CaseOutcome(GateStatus.FAIL, str(bad))
