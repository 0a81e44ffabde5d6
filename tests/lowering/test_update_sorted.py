"""update_sorted.cake and update_ranked.cake, the deterministic kmeans updates (a stable counting sort, then one
in-order fp32 sum per cluster; the second ranks inside a tile by `rank_equal`, a tile sort), lowered by the
Triton backend and run under the interpreter. Every test runs on both.

The gates themselves run in test_triton_verify (every shipped schedule the Triton backend accepts). Here: the
bits are identical on repeat and under a permuted order of the programs of every launch, and the adversarial
layouts (one cluster holding every point, empty clusters, N not a multiple of the tile, Inf/NaN/subnormal
features) give the plain-sum answer.

Small tiles so that the tiny shapes still span several point tiles, tile chunks and reduction chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from cake.experiments.schedules import load_with_params
from lowering_cases import REPO, assert_matches_reference

SORTED = REPO / "experiments" / "kmeans" / "update_sorted.cake"
RANKED = REPO / "experiments" / "kmeans" / "update_ranked.cake"
ATOMIC = REPO / "experiments" / "kmeans" / "update_atomic.cake"
SMALL_TILES = {"BN": 64, "BT": 16, "BK": 16, "BKS": 256, "BC": 8}
F32 = torch.float32

Kernel = Callable[..., Any]


@pytest.fixture(scope="module", params=[SORTED, RANKED], ids=lambda path: path.stem)
def update(interpreter: None, request: pytest.FixtureRequest) -> Kernel:
    return load_with_params(request.param, SMALL_TILES, backend="triton")


def _inputs(b: int, n: int, k: int, d: int, seed: int, clusters: int | None = None) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, n, d, generator=gen, dtype=F32) * 100.0  # wide magnitudes: rounding shows in the bits
    ids = torch.randint(0, clusters or k, (b, n), generator=gen, dtype=torch.int64)
    c_old = torch.randn(b, k, d, generator=gen, dtype=F32)
    return [x, ids, c_old]


def _bits(out: object) -> torch.Tensor:
    tensor = out[0] if isinstance(out, tuple) else out
    assert isinstance(tensor, torch.Tensor)
    return tensor.contiguous().view(torch.int32).clone()  # NaN payloads and signed zeros compared too


def _call(kernel: Kernel, inputs: list[torch.Tensor]) -> torch.Tensor:
    return _bits(kernel(*[t.clone() for t in inputs]))


@pytest.fixture
def permuted_programs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Run every launch's programs in another order: the interpreter walks grid axis 0 in order and tells each
    program its id through `set_grid_idx`; mapping that id through a bijection of the axis runs the same
    programs in the permuted order (`reversed`, or a seeded shuffle of each grid size)."""
    from triton.runtime.interpreter import InterpreterBuilder

    original = InterpreterBuilder.set_grid_idx
    orders: dict[int, list[int]] = {}
    mode = {"order": "identity"}

    def permuted(self: Any, x: int, y: int, z: int) -> None:
        size = self.grid_dim[0]
        if mode["order"] == "reversed":
            x = size - 1 - x
        elif mode["order"] == "shuffled":
            order = orders.setdefault(size, torch.randperm(size, generator=torch.Generator().manual_seed(size)).tolist())
            x = order[x]
        original(self, x, y, z)

    monkeypatch.setattr(InterpreterBuilder, "set_grid_idx", permuted)
    yield lambda order: mode.__setitem__("order", order)


def test_matches_the_reference_across_tiles_and_chunks(update: Kernel) -> None:
    for b, n, k, d, seed in [(2, 300, 5, 32, 0), (1, 97, 19, 32, 1), (3, 1, 4, 16, 2)]:
        inputs = _inputs(b, n, k, d, seed)
        assert_matches_reference("kmeans_update", inputs, update(*inputs), F32)


def test_bitwise_identical_on_repeat(update: Kernel) -> None:
    inputs = _inputs(2, 300, 5, 32, seed=3)
    first = _call(update, inputs)
    for _ in range(2):
        assert torch.equal(_call(update, inputs), first)


def test_bitwise_identical_under_permuted_program_order(update: Kernel,
                                                        permuted_programs: Callable[[str], None]) -> None:
    inputs = _inputs(2, 300, 3, 32, seed=4)
    baseline = _call(update, inputs)
    for order in ("reversed", "shuffled"):
        permuted_programs(order)
        assert torch.equal(_call(update, inputs), baseline), f"bits changed with the programs run {order}"


def test_the_permutation_hook_reorders_float_atomics(interpreter: None,
                                                     permuted_programs: Callable[[str], None]) -> None:
    """The control: the atomic update's fp32 sums land in program order, so the same hook changes its bits —
    the hook really reorders the programs, and the sorted update's invariance above is not vacuous."""
    atomic = load_with_params(ATOMIC, {"BN": 32}, backend="triton")
    inputs = _inputs(1, 300, 3, 32, seed=4)
    baseline = _call(atomic, inputs)
    permuted_programs("reversed")
    assert not torch.equal(_call(atomic, inputs), baseline)


def test_one_cluster_holds_every_point(update: Kernel) -> None:
    x, _, c_old = _inputs(2, 300, 6, 32, seed=5)
    ids = torch.full((2, 300), 4, dtype=torch.int64)
    out = update(x, ids, c_old)
    assert torch.allclose(out[:, 4].double(), x.double().mean(dim=1), rtol=1e-5, atol=1e-4)
    keep = [k for k in range(6) if k != 4]
    assert torch.equal(out[:, keep], c_old[:, keep])


def test_empty_clusters_keep_their_old_centroid_bit_for_bit(update: Kernel) -> None:
    x, _, c_old = _inputs(2, 130, 9, 32, seed=6)
    ids = torch.randint(0, 3, (2, 130), generator=torch.Generator().manual_seed(6)) * 3  # clusters 0, 3, 6
    out = update(x, ids, c_old)
    empty = [k for k in range(9) if k % 3]
    assert torch.equal(out[:, empty], c_old[:, empty])
    assert_matches_reference("kmeans_update", [x, ids, c_old], (out,), F32)


@pytest.mark.parametrize("n", [1, 63, 65, 127, 129])
def test_n_not_a_multiple_of_the_tile(update: Kernel, n: int) -> None:
    inputs = _inputs(2, n, 7, 16, seed=n)
    assert_matches_reference("kmeans_update", inputs, update(*inputs), F32)


def test_inf_nan_and_subnormals_follow_a_plain_sum(update: Kernel) -> None:
    d = 16
    x = torch.ones(1, 200, d, dtype=F32)
    ids = torch.arange(200, dtype=torch.int64).remainder(5)[None]  # cluster k: points k, k+5, ... (40 each)
    x[0, 0, 0] = float("inf")                     # cluster 0, feature 0: +Inf
    x[0, 1, 1], x[0, 6, 1] = float("inf"), -float("inf")  # cluster 1, feature 1: Inf - Inf = NaN
    x[0, 2, 2] = float("nan")                     # cluster 2, feature 2: NaN
    x[0, 3::5, :] = 1e-40                         # cluster 3: every value subnormal
    x[0, 4::5, 3] = -2.0                          # cluster 4, feature 3: an ordinary mean beside them
    c_old = torch.zeros(1, 5, d, dtype=F32)
    out = update(x, ids, c_old)[0]
    assert out[0, 0] == float("inf") and out[0, 1:].eq(1.0).all()
    assert out[1, 1].isnan() and out[1, 0] == 1.0 and out[1, 2:].eq(1.0).all()
    assert out[2, 2].isnan() and out[2, :2].eq(1.0).all()
    subnormal = torch.tensor(1e-40, dtype=F32)
    assert ((out[3] - subnormal).abs() <= 1e-45).all() and (out[3] > 0).all(), "a subnormal mean was flushed"
    assert out[4, 3] == -2.0 and out[4, :3].eq(1.0).all()


@pytest.mark.parametrize("stages", [1, 4])
def test_the_ranked_reduce_launch_alone_carries_its_pipeline_depth(stages: int) -> None:
    """RSTAGES reaches Triton as the reduce launch's num_stages; the other launches keep Triton's default."""
    from cake.lowering.runtime import lower, read_schedule

    kernel, text = read_schedule(str(RANKED))
    source = lower(kernel, "triton", params={"RSTAGES": stages}, filename=str(RANKED), source_text=text).source
    launcher = source[source.index("_k_compiled['histogram']"):]
    assert launcher.count("num_stages=") == 1
    reduce_call = launcher[launcher.index("_k_compiled['reduce']"):]
    assert f"num_stages={stages}," in reduce_call
