"""The state of one generated function: its lines (each tagged with the schedule span that produced it),
lexical scopes of tile variables, and the prologue of constexpr-only values hoisted to its top."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cake.ir.nodes import Expr
from cake.lowering import codes
from cake.lowering.triton.names import Namer
from cake.lowering.triton.values import Axis, Elem, Lit, Val

from cake.diagnostics import Diagnostic, DiagnosticError, Span

INDENT = "    "


@dataclass(frozen=True, slots=True)
class Var:
    """A schedule name bound in the generated function."""

    code: str
    dtype: Elem | None
    axes: tuple[Axis, ...] = ()
    lit: Lit | None = None
    upper: Expr | None = None  # loop and grid variables: exclusive upper bound (the lower bound is >= 0)
    zero_pad: bool = False  # its padding lanes hold 0 (never set for a name that is reassigned)

    def val(self) -> Val:
        return Val(self.code, self.dtype, self.axes, self.lit, zero_pad=self.zero_pad)


class Scope:
    def __init__(self, parent: Scope | None = None):
        self.parent = parent
        self.vars: dict[str, Var] = {}

    def lookup(self, name: str) -> Var | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        return None

    def define(self, name: str, var: Var) -> None:
        self.vars[name] = var


class FnBuilder:
    """Lines of one function body. `prologue` lines go first (hoisted values that depend only on
    constexprs: pad masks, dtype-variable locals); `lines` follow."""

    def __init__(self, namer: Namer, filename: str, level: int = 1):
        self.namer = namer
        self.filename = filename
        self.level = level
        self.lines: list[tuple[int, str, Span | None]] = []
        self.prologue: list[tuple[int, str, Span | None]] = []
        self._pads: dict[tuple[str, str], str] = {}
        self._hoisted: dict[str, str] = {}
        self.span: Span | None = None  # the statement being emitted: every line it produces is tagged with it

    def line(self, text: str, span: Span | None = None) -> None:
        self.lines.append((self.level, text, span or self.span))

    def temp(self, prefix: str) -> str:
        return self.namer.fresh(prefix)

    def assign_temp(self, prefix: str, code: str) -> str:
        name = self.temp(prefix)
        self.line(f"{name} = {code}")
        return name

    @contextmanager
    def block(self) -> Iterator[None]:
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1

    def pad_mask(self, axis: Axis) -> str:
        """The name of `tl.arange(0, physical) < extent`, computed once at the top of the function."""
        key = (axis.extent, axis.physical)
        if key not in self._pads:
            name = self.temp("pad")
            self.prologue.append((1, f"{name} = tl.arange(0, {axis.physical}) < {axis.extent}", None))
            self._pads[key] = name
        return self._pads[key]

    def hoist(self, name: str, code: str) -> str:
        """A prologue line `name = code`, once per name (dtype-variable locals such as `T`)."""
        if name not in self._hoisted:
            self.prologue.append((1, f"{name} = {code}", None))
            self._hoisted[name] = code
        return name

    def unsupported(self, message: str, span: Span | None, *, subject: str | None = None,
                    help: str | None = None) -> DiagnosticError:
        return DiagnosticError([Diagnostic(codes.UNSUPPORTED, message, span=span or self.span, file=self.filename,
                                           subject=subject, help=help)])

    def render(self, first_line: int) -> tuple[list[str], list[tuple[int, Span]]]:
        """The body's text lines and their spans; `first_line` is the 1-based line the body starts on."""
        out: list[str] = []
        spans: list[tuple[int, Span]] = []
        for level, text, span in self.prologue + self.lines:
            if span is not None:
                spans.append((first_line + len(out), span))
            out.append(INDENT * level + text)
        return out, spans
