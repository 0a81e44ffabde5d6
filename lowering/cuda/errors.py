"""Diagnostic codes of the CUDA backend and the one exception that carries them out of codegen.

Codes (C = CUDA backend):

| code  | meaning |
|-------|---------|
| C0100 | a statement or expression this backend cannot lower (never silently approximated) |
| C0101 | an mma form the target or the operands cannot use |
| C0102 | a tile whose layout the generator cannot derive (e.g. a vector never combined with an mma result) |
| C0201 | a barrier's declared arrivals disagree with the arrivals the roles make per phase |
| C0202 | a barrier's declared transaction bytes disagree with the TMA boxes that signal it |
| C0203 | a TMA copy whose box the hardware cannot move (box limits, alignment, shape vs destination) |
| C0301 | a resource the launch needs exceeds the target (threads, named barriers, registers, TMEM) |
| C0900 | nvcc or ptxas rejected the generated code (see compile.py) |
"""

from __future__ import annotations

import enum

from cake.diagnostics import Diagnostic, DiagnosticError, Span


class Code(enum.Enum):
    UNSUPPORTED = "C0100"
    MMA_FORM = "C0101"
    LAYOUT = "C0102"
    ARRIVALS = "C0201"
    TX_BYTES = "C0202"
    TMA_BOX = "C0203"
    RESOURCE = "C0301"


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
