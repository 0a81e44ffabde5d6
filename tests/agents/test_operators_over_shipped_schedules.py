"""Every structural pass and every agent operator over every shipped schedule of every registered workload.

Issue 17's generic-operator test: a result either checks clean or is refused with a located reason (an error
diagnostic with a line and column in the printed child), never a crash. The child is printed and parsed again
before it is checked, as the evolve loop's validator does, so every node the operator built has a span. The
schedules come from the workload registry (seeds and references of each op), not from a list of files.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from cake.agents.crossover import crossover
from cake.agents.mutations import PARAMETRIC, STRUCTURAL, Mutation
from cake.agents.specialize import SPECIALIZING
from cake.experiments.workload import get_workload, workload_names
from cake.ir import nodes as n
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.commit_wgmma import commit_wgmma
from cake.ir.transforms.drop_unused_params import drop_unused_params
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.free_copy_regs import free_copy_regs
from cake.ir.transforms.hoist_reduction import hoist_reduction
from cake.ir.transforms.hold_operand import hold_operand
from cake.ir.transforms.refit_forms import refit_forms
from cake.ir.transforms.sink_let import sink_let, sink_past_mma
from cake.ir.transforms.split_consumer import split_consumer
from cake.ir.transforms.tma_producer import tma_producer
from cake.ir.transforms.warp_specialize import warp_specialize

from cake.diagnostics import render_all

BACKENDS = ("cuda", "triton")
RNG_SEEDS = (0, 1)

PASSES: dict[str, Callable[[n.Kernel], n.Kernel | None]] = {
    "tma_producer": tma_producer,
    "split_consumer": split_consumer,
    "warp_specialize": warp_specialize,
    "hoist_reduction": hoist_reduction,
    "commit_wgmma": commit_wgmma,
    "fit_consumer_regs": fit_consumer_regs,
    "refit_forms": refit_forms,
    "drop_unused_params": drop_unused_params,
    "hold_operand": hold_operand,
    "sink_let": sink_let,
    "sink_past_mma": sink_past_mma,
    "free_copy_regs": free_copy_regs,
}


def _shipped() -> list[Path]:
    paths: list[Path] = []
    for name in workload_names():
        for op in get_workload(name).ops:
            paths += [*op.seed_paths(), *op.reference_paths()]
    return sorted(set(paths))


SHIPPED = _shipped()


def test_the_registry_ships_schedules_of_every_workload() -> None:
    workloads = {p.parent.name for p in SHIPPED}
    assert {"kmeans", "starter", "kda"} <= workloads, workloads


def _judge(child: n.Kernel, what: str) -> int:
    """Clean, or refused with every error located in the printed child's text; anything raised fails."""
    text = print_kernel(child)
    kernel = parse(text, "child.cake")
    for backend in BACKENDS:
        errors = [d for d in check(kernel, backend=backend, file="child.cake") if d.is_error]
        unlocated = [d for d in errors if d.span is None]
        assert not unlocated, f"{what} [{backend}]: refused without a location\n{render_all(unlocated, text)}"
    return 1


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_pass_and_operator_gives_a_clean_or_located_result(path: Path) -> None:
    kernel = parse(path.read_text(), path.name)
    judged = 0
    for name, transform in PASSES.items():
        out = transform(kernel)
        if out is not None:
            judged += _judge(out, f"pass {name} on {path.name}")
    operators: dict[str, Callable[[n.Kernel, random.Random], Mutation | None]] = {
        **PARAMETRIC, **STRUCTURAL, **SPECIALIZING}
    for name, operator in operators.items():
        for seed in RNG_SEEDS:
            mutation = operator(kernel, random.Random(seed))
            if mutation is not None:
                judged += _judge(mutation.kernel, f"operator {name} (rng {seed}) on {path.name}: {mutation.description}")
    others = [p for p in SHIPPED if p != path and p.parent == path.parent]
    for other in others:
        child = crossover(kernel, parse(other.read_text(), other.name), random.Random(0))
        if child is not None:
            judged += _judge(child.kernel, f"crossover {path.name} x {other.name}: {child.description}")
    assert judged >= len(RNG_SEEDS), f"no operator applied to {path.name}"
