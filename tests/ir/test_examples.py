"""The IR's expressiveness examples (ir/examples/*.cake) parse, round-trip, check clean and lower to Triton."""

from pathlib import Path

import pytest
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.lowering.runtime import lower

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "ir" / "examples").glob("*.cake"))
STATIC_DIMS = {"DK": 128, "DV": 128}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_round_trips_checks_clean_and_lowers(path: Path) -> None:
    kernel = parse(path.read_text(), str(path))
    assert parse(print_kernel(kernel)) == kernel
    errors = [d for d in check(kernel, dims=STATIC_DIMS) if d.is_error]
    assert errors == []
    lowered = lower(kernel, "triton")
    assert "@triton.jit" in lowered.source


def test_the_kda_example_is_there() -> None:
    assert any(p.name == "kda_chunk_forward.cake" for p in EXAMPLES)
