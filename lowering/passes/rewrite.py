"""A generic bottom-up rewrite over the frozen IR nodes, so a pass states only the nodes it changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

N = TypeVar("N")


def transform(node: N, fn: Callable[[Any], Any]) -> N:
    """Rebuild `node` bottom-up: every child first, then `fn` on the rebuilt node. Spans are kept."""
    if isinstance(node, tuple):
        return tuple(transform(item, fn) for item in node)  # type: ignore[return-value]
    if not is_dataclass(node) or isinstance(node, type):
        return node
    changes: dict[str, Any] = {}
    for f in fields(node):
        if f.name == "span":
            continue
        old = getattr(node, f.name)
        new = transform(old, fn)
        if new is not old:
            changes[f.name] = new
    rebuilt = replace(node, **changes) if changes else node  # type: ignore[type-var]
    return fn(rebuilt)  # type: ignore[no-any-return]


def walk(node: Any) -> Iterator[Any]:
    """Every node under `node` (itself included), depth first; spans are not visited."""
    yield node
    if isinstance(node, tuple):
        for item in node:
            yield from walk(item)
    elif is_dataclass(node) and not isinstance(node, type):
        for f in fields(node):
            if f.name != "span":
                yield from walk(getattr(node, f.name))
