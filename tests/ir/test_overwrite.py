"""`cake.ir.overwrite`: which scratch buffers a launch overwrites whole before any read (their init fill is dead)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.ir.overwrite import overwritten_scratch
from cake.ir.parser import parse

KMEANS = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"

# Two launches through one scratch buffer, as the k-means assigns precompute ||c||^2.
BASE = """
schedule s implements kmeans_assign
target sm_90a
param BN = 64 in {64}
dims B, N, K, D
tensor x: in f32[B, N, D]
tensor c: in f32[B, K, D]
tensor ids: out i32[B, N]
scratch csq: f32[B, K] = 0

launch norms {
  grid kt in cdiv(K, 64), b in B
  role main: warps 4 {
    let cf: f32[64, D] = load c[b, kt*64 : +64, :] masked other 0
    store sum(cf * cf, axis=1) -> csq[b, kt*64 : +64] masked
  }
}

launch assign {
  grid t in cdiv(N, BN), b in B
  role main: warps 4 {
    let cn: f32[64] = load csq[b, 0 : +64] masked other 0
    store argmin(cn[None, :] + sum(load x[b, t*BN : +BN, :] masked other 0, axis=1)[:, None], axis=1) -> ids[b, t*BN : +BN] masked
  }
}
"""


def variant(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new)


def test_covering_store_before_any_read_makes_the_fill_dead() -> None:
    assert overwritten_scratch(parse(BASE)) == {"csq": "norms"}


# The norms launch with its K tiles walked by a loop instead of the grid.
LOOPED = variant("grid kt in cdiv(K, 64), b in B\n  role main: warps 4 {\n"
                 "    let cf: f32[64, D] = load c[b, kt*64 : +64, :] masked other 0\n"
                 "    store sum(cf * cf, axis=1) -> csq[b, kt*64 : +64] masked\n",
                 "grid b in B\n  role main: warps 4 {\n"
                 "    for kt in 0 .. cdiv(K, 64) {\n"
                 "      let cf: f32[64, D] = load c[b, kt*64 : +64, :] masked other 0\n"
                 "      store sum(cf * cf, axis=1) -> csq[b, kt*64 : +64] masked\n"
                 "    }\n")


def test_a_loop_over_the_tiles_covers_like_a_grid_axis() -> None:
    assert overwritten_scratch(parse(LOOPED)) == {"csq": "norms"}


# A buffer of slots: a dim declared as the exact multiple `N * W`, slot g written at g*W : +W by `grid g in N`.
SLOTS = variant("scratch csq: f32[B, K] = 0", "scratch csq: f32[B, K * 64] = 0").replace(
    "grid kt in cdiv(K, 64), b in B", "grid kt in K, b in B")


def test_slots_of_an_exact_multiple_cover_like_tiles() -> None:
    assert overwritten_scratch(parse(SLOTS)) == {"csq": "norms"}


@pytest.mark.parametrize("text", [
    pytest.param(variant("grid kt in cdiv(K, 64), b in B", "grid kt in cdiv(K, 128), b in B"), id="half-the-tiles"),
    pytest.param(variant("-> csq[b, kt*64 : +64]", "-> csq[b, kt*64 : +32]"), id="narrower-than-the-stride"),
    pytest.param(variant("-> csq[b, kt*64 : +64]", "-> csq[0, kt*64 : +64]"), id="one-batch-only"),
    pytest.param(variant("grid kt in cdiv(K, 64), b in B\n  role main: warps 4 {",
                         "grid persistent kt in cdiv(K, 64), b in B\n  role main: warps 4 {"), id="persistent-grid"),
    pytest.param(variant("    store sum(cf * cf, axis=1) -> csq[b, kt*64 : +64] masked\n",
                         "    for r in 0 .. 1 {\n      store sum(cf * cf, axis=1) -> csq[b, kt*64 : +64] masked\n"
                         "    }\n"), id="store-in-a-loop"),
    pytest.param(variant("let cf: f32[64, D] = load c[b, kt*64 : +64, :] masked other 0",
                         "let cf: f32[64, D] = load c[b, kt*64 : +64, :] masked other 0\n"
                         "    let old: f32[64] = load csq[b, kt*64 : +64] masked other 0"), id="read-in-the-same-launch"),
    pytest.param(variant("grid kt in cdiv(K, 64), b in B\n  role main: warps 4 {\n"
                         "    let cf: f32[64, D] = load c[b, kt*64 : +64, :] masked other 0",
                         "grid kt in cdiv(K, 64), b in B\n  role main: warps 4 {\n"
                         "    let pre: f32[64] = load csq[b, 0 : +64] masked other 0\n"
                         "    let cf: f32[64, D] = load c[b, kt*64 : +64, :] masked other 0"), id="read-before-write"),
    pytest.param(variant("grid kt in cdiv(K, 64), b in B\n  role main: warps 4 {",
                         "grid kt in cdiv(K, 64), b in B, z in N\n  role main: warps 4 {"),
                 id="a-grid-axis-the-store-does-not-use"),  # N = 0 runs no CTA over a non-empty buffer
    pytest.param(BASE.replace("scratch csq: f32[B, K] = 0", "scratch csq: f32[B, B] = 0").replace(
        "grid kt in cdiv(K, 64), b in B", "grid b in B").replace("-> csq[b, kt*64 : +64]", "-> csq[b, b]"),
                 id="one-variable-for-two-dims"),  # the diagonal only
    pytest.param(LOOPED.replace("for kt in 0 .. cdiv(K, 64)", "for kt in 1 .. cdiv(K, 64)"),
                 id="loop-not-from-zero"),
    pytest.param(LOOPED.replace("for kt in 0 .. cdiv(K, 64)", "for kt in 0 .. cdiv(K, 128)"),
                 id="loop-over-half-the-tiles"),
    pytest.param(LOOPED.replace("for kt in 0 .. cdiv(K, 64)", "for kt in 0 .. cdiv(K, 64) expect 2"),
                 id="loop-bound-from-data"),
    pytest.param(LOOPED.replace("      let cf: f32[64, D]", "      let b: i32 = 0\n      let cf: f32[64, D]"),
                 id="grid-variable-rebound"),
    pytest.param(SLOTS.replace("K * 64] = 0", "K * 128] = 0"), id="slots-wider-than-the-stores"),
    pytest.param(SLOTS.replace("grid kt in K, b in B", "grid kt in cdiv(K, 2), b in B"), id="half-the-slots"),
])
def test_fill_is_kept_unless_proven_dead(text: str) -> None:
    assert overwritten_scratch(parse(text)) == {}


@pytest.mark.parametrize(("schedule", "expected"), [
    ("assign_pingpong.cake", {"csq_g": "centroid_norms"}),
    ("assign_tcgen05.cake", {"csq_g": "centroid_norms"}),
    ("update_atomic.cake", {}),  # sums and counts are accumulated into: their zero fill is live
    # hist is accumulated into; perm is scattered to (`perm[b, slot]`)
    ("update_sorted.cake", {"counts": "scan_tiles", "starts": "scan_clusters"}),
    ("update_ranked.cake", {"counts": "scan_tiles", "starts": "scan_clusters"}),
    # the intra launch's six buffers at the top level, recur's two inside its loop over the chunks
    ("../kda/kda_fused_chunkpar.cake", {name: "intra" for name in ("ws", "us", "kls", "qds", "ps", "gls")}),
])
def test_shipped_schedules(schedule: str, expected: dict[str, str]) -> None:
    assert overwritten_scratch(parse((KMEANS / schedule).read_text())) == expected
