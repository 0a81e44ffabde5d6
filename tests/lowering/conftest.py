"""Shared fixtures for the lowering tests.

Triton reads TRITON_INTERPRET when it defines kernels — its own library functions included, at import — so
the variable is set here, before any test module of this folder imports Triton. `interpreter` fails loudly
(it never skips) if something imported Triton earlier without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

@pytest.fixture(scope="session", autouse=True)
def kernel_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every lowering test writes its kernels to a private cache root, never to ~/.cache."""
    root = tmp_path_factory.mktemp("cake-kernels")
    old = os.environ.get("CAKE_CACHE_DIR")
    os.environ["CAKE_CACHE_DIR"] = str(root)
    yield root
    if old is None:
        os.environ.pop("CAKE_CACHE_DIR", None)
    else:
        os.environ["CAKE_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def interpreter() -> None:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(tl.standard.cdiv, InterpretedFunction):
        pytest.fail("Triton was imported before TRITON_INTERPRET=1 was set; run tests/lowering in a fresh process")
