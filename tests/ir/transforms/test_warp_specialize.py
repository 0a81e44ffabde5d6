"""warp_specialize: the composition its docstring states, on the plain kmeans assign of the tests' BEFORE."""

from __future__ import annotations

from dataclasses import replace

from cake.ir import nodes as n
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.transforms.hoist_reduction import hoist_reduction
from cake.ir.transforms.sites import main_launch
from cake.ir.transforms.split_consumer import split_consumer
from cake.ir.transforms.tma_producer import tma_producer
from cake.ir.transforms.warp_specialize import warp_specialize
from cake.ir.visit import with_launch
from test_tma_producer import BEFORE


def test_producer_then_consumers_then_a_persistent_grid_then_the_hoists() -> None:
    split = split_consumer(tma_producer(parse(BEFORE)))  # type: ignore[arg-type]
    assert split is not None
    launch = main_launch(split)
    persistent = with_launch(split, launch, replace(launch, grid=replace(launch.grid, kind=n.GridKind.PERSISTENT)))
    expected = hoist_reduction(persistent)
    out = warp_specialize(parse(BEFORE))
    assert out == expected
    assert out is not None and {p.name for p in out.params} >= {"PRODUCER_REGS", "CONSUMER_REGS", "CONSUMERS",
                                                                 "HOIST_WARPS"}
    assert not [d for d in check(out, arch="sm_90a", backend="cuda", dims={"D": 64}) if d.is_error]


def test_a_kernel_without_a_pipelined_load_is_nothing_to_do() -> None:
    assert warp_specialize(parse(BEFORE.replace(" pipelined STAGES as s", ""))) is None
