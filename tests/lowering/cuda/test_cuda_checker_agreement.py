"""The checker and the CUDA generator agree: `cake check --backend cuda` refuses, before any code is generated,
every shipped schedule the generator refuses (cuda_cases.CUDA_REFUSED), so an accepted schedule compiles."""

from __future__ import annotations

import pytest
from cake.ir.check import check
from cuda_cases import CUDA_REFUSED, read


@pytest.mark.parametrize("rel", sorted(CUDA_REFUSED))
def test_the_checker_refuses_what_the_backend_refuses(rel: str) -> None:
    """`cake check --backend cuda` must not accept a shipped schedule the CUDA generator refuses: each gets an
    E06xx error (the backend-capability family) located in the file, before any code is generated."""
    kernel, _ = read(rel)
    found = [d for d in check(kernel, backend="cuda", dims={"D": 128}, file=rel) if d.is_error]
    assert found and all(d.span is not None for d in found), rel
    assert any(d.code.startswith("E06") for d in found), [d.code for d in found]
