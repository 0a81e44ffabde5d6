"""The `fuse` operator (`mutate_fusion`, calling the `fuse_launches` pass) and how the offline agent offers it:
only to runs whose backend can lower a grid-wide barrier (the CUDA backend; Triton refuses it, E0606)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from cake.agents.base import AgentTurn, Parent, TurnContext
from cake.agents.loop import EvolutionLoop, LoopSettings
from cake.agents.mutations import STRUCTURAL, mutate_fusion, offered
from cake.agents.offline import BASE_WEIGHTS, OfflineAgent
from cake.agents.validation import make_validator
from cake.experiments.workload import get_workload
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.hoist_reduction import hoist_reduction
from cake.ir.transforms.warp_specialize import warp_specialize
from conftest import SEED
from fake_toolchain import FakeToolchain

from cake.runs.store import RunStore

ARCH = "sm_90a"
DIMS = get_workload("flash_kmeans").fitness_shape("kmeans_assign").dim_map


def _plain() -> n.Kernel:
    return parse(SEED.read_text(), SEED.name)


def _hoisted_pingpong() -> n.Kernel:
    """What the search reaches from the plain seed: the norms hoisted to a launch of their own, then the TMA
    producer and ping-pong consumers on a persistent grid (`warp_specialize`)."""
    kernel = warp_specialize(_plain())
    assert kernel is not None and len(kernel.launches) == 2
    return kernel


def test_it_fuses_the_hoisted_launch_of_a_two_launch_pingpong_into_one_checker_clean_kernel() -> None:
    parent = _hoisted_pingpong()
    child = mutate_fusion(parent, random.Random(0))
    assert child is not None
    pre, main = parent.launches
    assert child.kernel == replace(parent, fusions=(n.Fusion(pre.name, main.name),))
    assert child.description.startswith(f"fuse {pre.name} into {main.name}")
    checked = make_validator(ARCH, "cuda", dims=DIMS)(print_kernel(child.kernel))  # checker + CUDA lowering
    assert checked.ok, [d.code for d in checked.errors]
    refused = make_validator(ARCH, "triton", dims=DIMS)(print_kernel(child.kernel))
    assert "E0606" in {d.code for d in refused.errors}


def test_it_does_nothing_to_one_launch_a_non_persistent_main_launch_or_a_fused_kernel() -> None:
    rng = random.Random(0)
    assert mutate_fusion(_plain(), rng) is None
    tiles = hoist_reduction(_plain())  # two launches, the main one over a tile grid
    assert tiles is not None and len(tiles.launches) == 2 and tiles.launches[1].grid.kind is n.GridKind.TILES
    assert mutate_fusion(tiles, rng) is None
    fused = mutate_fusion(_hoisted_pingpong(), rng)
    assert fused is not None and mutate_fusion(fused.kernel, rng) is None


def test_it_is_offered_to_cuda_runs_only() -> None:
    assert STRUCTURAL["fuse"] is mutate_fusion and "fuse" in BASE_WEIGHTS
    assert offered("fuse", "cuda") and not offered("fuse", "triton")
    assert offered("fuse", None)  # a context that does not say its backend excludes nothing
    assert all(offered(name, backend) for name in BASE_WEIGHTS if name not in ("fuse", "hold", "cluster", "defer")
               for backend in ("cuda", "triton"))


def _operators_drawn(backend: str, seed: int) -> set[str]:
    parent = _hoisted_pingpong()
    text = print_kernel(parent)
    ctx = TurnContext(turn=1, op="kmeans_assign", arch=ARCH, n=24,
                      parents=(Parent(1, text, parse(text), None, None, None, "passed"),), failures=(),
                      seen_hashes=frozenset(), rng=random.Random(seed), validate=make_validator(ARCH, backend),
                      backend=backend)
    return {p.mutation.split(":", 1)[0] for p in OfflineAgent().propose(ctx).proposals}


def test_the_offline_agent_draws_it_for_cuda_and_never_for_triton() -> None:
    # Over a few turns' seeds: whether one turn of 24 proposals draws `fuse` depends on every operator's weight
    seeds = range(3)
    assert any("fuse" in _operators_drawn("cuda", seed) for seed in seeds)
    assert not any("fuse" in _operators_drawn("triton", seed) for seed in seeds)


class _Recording(OfflineAgent):
    def __init__(self) -> None:
        super().__init__()
        self.backends: list[str | None] = []

    def propose(self, ctx: TurnContext) -> AgentTurn:
        self.backends.append(ctx.backend)
        return super().propose(ctx)


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_the_loop_tells_the_agent_its_backend(tmp_path: Path, backend: str) -> None:
    agent = _Recording()
    settings = LoopSettings(turns=2, proposals_per_turn=4, evals_per_turn=1, seed=0)
    store = RunStore.create(tmp_path / "run", {})
    EvolutionLoop(store, agent, FakeToolchain(SEED, backend=backend), settings, [SEED]).run()
    assert agent.backends == [backend]
