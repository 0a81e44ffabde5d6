"""The registry of static checks: stable IDs, titles, message templates, known-bad examples.

A check is a function `(ctx) -> Iterable[Finding]` registered with `@check(...)`. The driver
(`cake.ir.check`) turns each finding into a `Diagnostic` by filling the check's message template with the
finding's fields, so the wording of a check lives in one place. Backend-specific checks carry a
`backend` tag and run only when the caller checks for that backend.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cake.diagnostics import Severity, Span

if TYPE_CHECKING:
    from cake.ir.checks.context import CheckContext


class Family(enum.Enum):
    NAMES = "E01"  # names and element types
    SHAPES = "E02"  # tile shapes and tail masking
    RESOURCES = "E03"  # per-arch budgets
    SYNC = "E04"  # barriers, ordering, deadlock
    LEGALITY = "E05"  # instructions the target has
    BACKEND = "E06"  # what a backend can express
    LEARNED = "L"  # rules distilled from recurring failures

    @property
    def title(self) -> str:
        return _FAMILY_TITLES[self]


_FAMILY_TITLES = {
    Family.NAMES: "names and types", Family.SHAPES: "shapes and tail masking",
    Family.RESOURCES: "resource budgets", Family.SYNC: "synchronization",
    Family.LEGALITY: "hardware legality", Family.BACKEND: "backend capability",
    Family.LEARNED: "learned rules",
}


class Backend(enum.Enum):
    TRITON = "triton"
    CUDA = "cuda"


@dataclass(frozen=True, slots=True)
class BadExample:
    """A small complete schedule that must raise its check's ID (and no other error)."""

    text: str
    backend: Backend | None = None
    arch: str | None = None  # None: the schedule's own target
    dims: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Finding:
    """What a check reports; the driver adds the code, the message and the file."""

    span: Span | None
    fields: Mapping[str, object]
    subject: str | None = None
    label: str | None = None
    help: str | None = None
    notes: tuple[str, ...] = ()
    severity: Severity = Severity.ERROR
    message: str | None = None  # replaces the check's template (notes saying what could not be proven)


def finding(node: object, subject: str | None, label: str | None, *, help: str | None = None,
            notes: tuple[str, ...] = (), severity: Severity = Severity.ERROR, message: str | None = None,
            **fields: object) -> Finding:
    """A finding located at `node`'s span (any IR node, or None)."""
    span = getattr(node, "span", None)
    return Finding(span if isinstance(span, Span) else None, fields, subject, label, help, notes, severity, message)


class CheckFn(Protocol):
    def __call__(self, ctx: CheckContext) -> Iterable[Finding]: ...


@dataclass(frozen=True, slots=True)
class CheckSpec:
    id: str
    title: str
    message: str  # a str.format template over the finding's fields
    family: Family
    run: CheckFn
    examples: tuple[BadExample, ...]
    backend: Backend | None = None  # None: applies whatever the backend
    severity: Severity = Severity.ERROR
    provenance: Mapping[str, object] | None = None  # learned rules: where the rule came from

    def applies_to(self, backend: Backend | None) -> bool:
        return self.backend is None or self.backend is backend


class RegistryError(ValueError):
    pass


REGISTRY: dict[str, CheckSpec] = {}


def register(spec: CheckSpec, registry: dict[str, CheckSpec] | None = None) -> CheckSpec:
    target = REGISTRY if registry is None else registry
    if spec.id in target:
        raise RegistryError(f"check ID {spec.id} registered twice")
    if not spec.examples and spec.family is not Family.LEARNED:
        raise RegistryError(f"check {spec.id} has no known-bad example")
    target[spec.id] = spec
    return spec


def check(id: str, title: str, message: str, *, examples: Iterable[BadExample],
          backend: Backend | None = None) -> Callable[[CheckFn], CheckFn]:
    """Register the decorated function as check `id` (family from the ID's first three characters)."""
    family = next(f for f in Family if f is not Family.LEARNED and id.startswith(f.value))

    def decorate(fn: CheckFn) -> CheckFn:
        register(CheckSpec(id, title, message, family, fn, tuple(examples), backend))
        return fn

    return decorate


def all_checks() -> tuple[CheckSpec, ...]:
    """Every built-in check, in ID order (importing the check modules registers them)."""
    import cake.ir.checks  # noqa: F401  (registers the families)

    return tuple(sorted(REGISTRY.values(), key=lambda s: s.id))
