"""IR -> IR passes: one `Kernel -> Kernel | None` pass per module, named after it (None: nothing to do here).

Each pass has Before/Expected tests in CAKE's own syntax (tests/ir/transforms/test_<pass>.py). The agents'
mutation operators choose a site and call a pass; the lowering pipelines call the ones they need.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cake.ir.nodes import Kernel


def apply(transform: Callable[..., Kernel | None], kernel: Kernel, *args: Any, **kwargs: Any) -> Kernel:
    """`transform(kernel, ...)`, or `kernel` itself when the pass had nothing to do (returned None)."""
    out = transform(kernel, *args, **kwargs)
    return kernel if out is None else out
