"""The `widen` operator: a param whose default sits at an end of its domain steps past that end, following the
domain's progression. The plain assign seed bounds BK at 128, so no search from it could try a 256-column centroid
tile (a wgmma n256) until something moved the bound."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from cake.agents.mutations import mutate_widen, value_beyond, values_beyond
from cake.ir import nodes as n
from cake.ir.analysis import domain_values
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.printer import print_kernel

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("values, high, beyond", [
    ((16, 32, 64, 128), True, 256), ((16, 32, 64, 128), False, 8),  # doubling
    ((24, 32, 40), True, 48), ((24, 32, 40), False, 16),  # evenly spaced
    ((3, 6), False, None),  # halving an odd value leaves the integers
    ((8, 16), False, 4), ((1, 2), False, None),  # (1, 2) doubles: halving 1 gives nothing at or above 1
    ((2, 3, 5), True, None), ((64,), True, None),  # no progression; a single value has none
])
def test_the_value_past_an_end_follows_the_domains_progression(values: tuple[int, ...], high: bool,
                                                               beyond: int | None) -> None:
    assert value_beyond(values, high) == beyond


def _param(default: int, domain: n.Domain) -> n.Param:
    return n.Param("P", default, domain)


def test_only_an_end_the_default_sits_at_is_widened() -> None:
    assert values_beyond(_param(128, n.ValueSet((16, 32, 64, 128)))) == [256]
    assert values_beyond(_param(64, n.ValueSet((16, 32, 64, 128)))) == []  # inside: the param operators move it
    assert values_beyond(_param(1, n.ValueRange(1, 7))) == []  # 0 stages is no pipeline
    assert values_beyond(_param(6, n.ValueRange(1, 7))) == [7]
    assert values_beyond(_param(4, n.ValueRange(4, 5))) == []  # one value: no end to step past
    assert values_beyond(_param(2, n.ValueSet((2, 4)))) == [1]


def test_a_widened_child_keeps_the_old_values_and_moves_the_default_past_the_bound() -> None:
    kernel = parse((REPO / "experiments/kmeans/assign_plain.cake").read_text(), "assign_plain.cake")
    assert mutate_widen(kernel, random.Random(0)) is None  # every default of the seed sits inside its domain
    # BK moved to its bound (as the search's param moves do); BK is then the one param at an end
    at_bound = replace(kernel, params=tuple(replace(p, default=128) if p.name == "BK" else p for p in kernel.params))
    mutation = mutate_widen(at_bound, random.Random(0))
    assert mutation is not None and mutation.description == "widen BK past its domain: 128->256"
    assert domain_values(mutation.kernel, "BK") == (16, 32, 64, 128, 256)
    child = parse(print_kernel(mutation.kernel), "child.cake")
    assert child.param("BK") == replace(mutation.kernel.param("BK"), span=child.param("BK").span)  # type: ignore[arg-type, union-attr]
    for backend in ("triton", "cuda"):  # checks clean or is refused with a located reason
        assert not [d for d in check(child, backend=backend, file="child.cake") if d.is_error and d.span is None]
