"""One diagnostic type and one renderer, shared by the parser, checker, lowering and verifier.

Diagnostics render rustc-style::

    error[E0301]: shared memory over budget in launch `assign`: 466,048 bytes > 232,448 bytes on sm_90a
      --> assign.cake:29:3
        |
     29 |   smem cs[STAGES]: T[BK, D] swizzle 128B
        |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ 466,048 bytes > 232,448 bytes limit on sm_90a
       = note: buffers: xs: 2 x 32,768; cs: 6 x 65,536; csq: 6 x 1,024; 16 mbarriers: 128
       = help: lower the stage count or tile size of `cs` (393,216 bytes)

A diagnostic never carries an internal file path or a Python traceback: `file` is the user's input name.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Span:
    """A 1-based source range; `end_*` is exclusive in column and inclusive in line."""

    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def point(line: int, column: int) -> Span:
        return Span(line, column, line, column + 1)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A located, coded finding. `code` is a stable ID such as E0301; `subject` names the role,
    resource or stage responsible, so an agent can repair the right place."""

    code: str
    message: str
    severity: Severity = Severity.ERROR
    span: Span | None = None
    file: str = "<input>"
    subject: str | None = None
    label: str | None = None  # text under the caret: the observed value against the limit
    help: str | None = None  # a fix, when one is known
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["severity"] = self.severity.value
        return data


class DiagnosticError(Exception):
    """Raised at a boundary to carry diagnostics out of a phase (parse, lower, compile) at once."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        super().__init__("; ".join(f"{d.code}: {d.message}" for d in diagnostics))
        self.diagnostics = tuple(diagnostics)


def render(diagnostic: Diagnostic, source: str | None = None) -> str:
    """Render one diagnostic with a source excerpt and caret when the span and source are known."""
    head = f"{diagnostic.severity.value}[{diagnostic.code}]: {diagnostic.message}"
    lines = [head]
    span = diagnostic.span
    if span is None:
        lines.append(f"  --> {diagnostic.file}")
    else:
        lines.append(f"  --> {diagnostic.file}:{span.line}:{span.column}")
        source_lines = source.splitlines() if source is not None else []
        if 1 <= span.line <= len(source_lines):
            text = source_lines[span.line - 1].expandtabs(1)
            gutter = " " * len(str(span.line))
            width = span.end_column - span.column if span.end_line == span.line else len(text) - span.column + 1
            carets = "^" * max(1, width)
            lines.append(f" {gutter} |")
            lines.append(f" {span.line} | {text}")
            label = f" {diagnostic.label}" if diagnostic.label else ""
            lines.append(f" {gutter} | {' ' * (span.column - 1)}{carets}{label}")
        elif diagnostic.label:
            lines.append(f"   = {diagnostic.label}")
    if span is None and diagnostic.label:
        lines.append(f"   = {diagnostic.label}")
    for note in diagnostic.notes:
        lines.append(f"   = note: {note}")
    if diagnostic.help:
        lines.append(f"   = help: {diagnostic.help}")
    return "\n".join(lines)


def render_all(diagnostics: Iterable[Diagnostic], source: str | None = None) -> str:
    return "\n\n".join(render(d, source) for d in diagnostics)


def to_json(diagnostics: Iterable[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diagnostics], indent=2)
