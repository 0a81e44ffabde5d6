"""Diagnostic codes of the CUDA backend and the one exception that carries them out of codegen.

Codes (C = CUDA backend):

| code  | meaning |
|-------|---------|
| C0100 | a statement or expression this backend cannot lower (never silently approximated) |
| C0101 | an mma form the target or the operands cannot use |
| C0102 | a tile whose layout the generator cannot derive (e.g. a vector never combined with an mma result) |
| (C0201) | arrivals vs the roles' arrivals, and (C0202) declared tx bytes vs the copies: re-checked by codegen as invariants (`CheckerGap`), refused by the checker first (E0402, E0403) |
| C0203 | a TMA copy whose box the hardware cannot move (box limits, alignment, shape vs destination) |
| C0301 | a resource the launch needs exceeds the target (threads, named barriers, registers, TMEM) |
| C0900 | nvcc or ptxas rejected the generated code (see compile.py) |
"""

from __future__ import annotations

import enum

from cake.diagnostics import Diagnostic, DiagnosticError, Span
from cake.errors import InternalError


class Code(enum.Enum):
    UNSUPPORTED = "C0100"
    MMA_FORM = "C0101"
    LAYOUT = "C0102"
    TMA_BOX = "C0203"
    RESOURCE = "C0301"


class CheckerGap(InternalError):
    """Codegen found a commitment inconsistent (arrivals, transaction bytes, a setmaxnreg budget) that the
    checker proves before codegen runs (E0402, E0403, E0303). Reaching this means the checker accepted it:
    a bug in CAKE, never a diagnostic about the schedule."""

    def __init__(self, what: str, span: Span | None):
        where = f" (schedule line {span.line}:{span.column})" if span is not None else ""
        super().__init__("CUDA generator", f"the checker accepted {what}{where}")


class LoweringError(DiagnosticError):
    """Raised by codegen with every diagnostic it collected for one schedule."""


def diag(code: Code, message: str, span: Span | None, file: str, *, subject: str | None = None,
         label: str | None = None, help: str | None = None, notes: tuple[str, ...] = ()) -> Diagnostic:
    return Diagnostic(code.value, message, span=span, file=file, subject=subject, label=label, help=help,
                      notes=notes)


class Unlowerable(Exception):
    """Internal: raised deep in codegen and turned into a C0100-family diagnostic at the statement boundary."""

    def __init__(self, code: Code, message: str, help: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.help = help
