"""The case runner: the one boundary where a kernel's exceptions are caught.

`call_kernel` is the only place the verifier calls user code. What the kernel raises becomes a
`KernelRaised` carrying its type and message; `run_case` turns that into a RUNTIME_ERROR outcome. Nothing
else is caught anywhere in the verifier, so a bug in the verifier itself surfaces as a crash, never as a
verdict, and a crash in a kernel is never a pass.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from cake.verifier.results import Evidence, GateStatus
from torch import Tensor

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


class BadReturn(Exception):
    """The kernel returned something that is not the contract's outputs (a FAIL, not a crash)."""


def call_kernel(kernel: Callable[..., object], inputs: tuple[Tensor | None, ...], n_outputs: int) -> tuple[Tensor, ...]:
    try:
        result = kernel(*inputs)
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


def run_case(check: Callable[[], CaseOutcome]) -> CaseOutcome:
    """Run one gate check on one case; kernel exceptions and bad returns become outcomes here, only here."""
    try:
        return check()
    except KernelRaised as raised:
        return CaseOutcome(GateStatus.RUNTIME_ERROR, f"kernel raised {raised}")
    except BadReturn as bad:
        return CaseOutcome(GateStatus.FAIL, str(bad))
