"""Stable, collision-free names in generated Python.

Schedule identifiers keep their spelling unless they would shadow something the generated code needs
(Python keywords and builtins it calls, `tl`, `triton`, `torch`, `math`, the launcher's `out` and `workspace`
keywords, the `_k_` helpers); those get a trailing underscore. Generated temporaries share one counter per
function (`offs0`, `ptrs1`, `mask2`, `ld3`), so the same schedule always yields the same text.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Iterable

HELPER_PREFIX = "_k_"
# The generated launcher's keyword-only parameters: a caller's output tensors and workspace (triton/module.py).
OUT_KEYWORD = "out"
WORKSPACE_KEYWORD = "workspace"
RESERVED: frozenset[str] = frozenset({
    *keyword.kwlist, *keyword.softkwlist, *dir(builtins), "tl", "triton", "torch", "math", OUT_KEYWORD,
    WORKSPACE_KEYWORD,
})


class Namer:
    """Hands out names in one Python scope. `user(name)` maps a schedule identifier; `fresh(prefix)` makes
    a temporary; `claim(name)` takes a specific derived name (`x_ptr`), suffixing `_` until it is free."""

    def __init__(self, taken: Iterable[str] = (), counter: int = 0):
        self._taken: set[str] = set(taken)
        self._user: dict[str, str] = {}
        self._counter = counter

    def child(self) -> Namer:
        """A namer for a nested scope: it sees every name taken so far and keeps the user mapping."""
        child = Namer(self._taken)
        child._user = dict(self._user)
        return child

    def _free(self, name: str) -> bool:
        return name not in self._taken and name not in RESERVED and not name.startswith(HELPER_PREFIX)

    def user(self, name: str) -> str:
        if name not in self._user:
            code = name
            while not self._free(code):
                code += "_"
            self._user[name] = code
            self._taken.add(code)
        return self._user[name]

    def claim(self, name: str) -> str:
        code = name
        while not self._free(code):
            code += "_"
        self._taken.add(code)
        return code

    def fresh(self, prefix: str) -> str:
        while True:
            code = f"{prefix}{self._counter}"
            self._counter += 1
            if self._free(code):
                self._taken.add(code)
                return code
