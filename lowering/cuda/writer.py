"""An indenting line writer for generated C++, with fresh stable names."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from cake.diagnostics import Span


class Writer:
    def __init__(self, indent: int = 0):
        self.lines: list[str] = []
        self.depth = indent
        self._counters: dict[str, int] = {}

    def line(self, text: str = "") -> None:
        self.lines.append(("  " * self.depth + text) if text else "")

    def lines_of(self, text: str) -> None:
        for part in text.splitlines():
            self.line(part)

    def comment(self, text: str) -> None:
        for part in text.splitlines():
            self.line(f"// {part}")

    def marker(self, span: Span | None, text: str) -> None:
        """A comment naming the IR statement below; compile errors map back through `// @L<line>:<col>`."""
        where = f"@L{span.line}:{span.column} " if span is not None else ""
        self.line(f"// {where}{text}")

    @contextmanager
    def block(self, head: str, tail: str = "}") -> Iterator[None]:
        self.line(head + " {")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self.line(tail)

    def fresh(self, stem: str) -> str:
        """`stem0`, `stem1`, ...: stable across runs because generation order is deterministic."""
        n = self._counters.get(stem, 0)
        self._counters[stem] = n + 1
        return f"{stem}{n}"

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
