"""A count of the aten ops a block of code runs (allocations, copies, views, fills), for tests that prove a call
allocates or copies nothing: `with AtenOps() as ops: call(); assert ops.seen["aten.empty.memory_format"] == 0`."""

from __future__ import annotations

import collections
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class AtenOps(TorchDispatchMode):
    """Every aten op dispatched inside the `with` block, counted by name (`str(func)`)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen[str(func)] += 1
        return func(*args, **(kwargs or {}))
