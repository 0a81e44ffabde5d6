"""What the Triton emitter leaves out of the hot loop (issue 17, item 4; lowering/README.md "Emitted code next to
hand-written Triton"): one reduction for a `min`/`argmin` pair, no pad mask on a power-of-two static dim, and in
the norms schedule no per-tile `||c||^2` and no per-element tail mask. The pairing rule is unit-tested on IR
text; the fused reduction's NaN semantics run under the interpreter against torch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.lowering.runtime import load, lower
from cake.lowering.triton.extremes import paired

REPO = Path(__file__).resolve().parents[2]
KMEANS = REPO / "experiments" / "kmeans"


def _source(name: str, params: dict[str, int] | None = None) -> str:
    path = KMEANS / f"{name}.cake"
    return lower(parse(path.read_text(), path.name), "triton", params=params, filename=path.name).source


def _loop_body(source: str, kernel: str) -> str:
    """The lines of the first `for` loop of the jit function `kernel` (indented deeper than its header)."""
    fn = source[source.index(f"def {kernel}("):]
    header = re.search(r"^( *)for .*:(  #.*)?\n", fn, re.M)
    assert header is not None, f"{kernel} has no loop"
    indent = len(header.group(1))
    body = []
    for line in fn[header.end():].splitlines():
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "\n".join(body)


@pytest.mark.parametrize("name", ["assign_plain", "assign_plain_norms"])
def test_min_and_argmin_of_the_distance_tile_share_their_reductions(name: str) -> None:
    launch = "assign_plain_main" if name == "assign_plain" else "assign_plain_norms_assign"
    body = _loop_body(_source(name), launch)
    # one value reduction (minNum: no NaN guard per element) and one index reduction, shared by the pair
    assert re.search(r"min\d+ = tl\.min\(dist, axis=1\)", body)
    assert re.search(r"argmin\d+ = tl\.min\(tl\.where\(dist == tl\.expand_dims\(min\d+, 1\), "
                     r"tl\.arange\(0, BK\)\[None, :\], 2147483647\), axis=1\)", body)
    assert body.count("tl.min(") == 2
    assert "return_indices" not in body and "tl.argmin(" not in body
    assert "tl.minimum(dist" not in body  # no NaN guard over the tile


def test_the_norms_schedule_streams_the_norms_instead_of_recomputing_them() -> None:
    source = _source("assign_plain_norms", {"BN": 128, "BK": 128, "STAGES": 2, "WARPS": 4})
    body = _loop_body(source, "assign_plain_norms_assign")
    assert "tl.sum(" not in body and ".to(tl.float32)" not in body  # no ||c||^2 per tile
    assert "        dist = csq[None, :] - 2 * dot\n" in body  # no per-element tail mask: the norm is +inf there
    assert "< K)" not in body.replace("(offs5 < K)", "").replace("(offs9 < K)", "")  # only the loads' bounds
    assert re.search(r"csq = tl\.load\(.*other=float\(\"inf\"\)\)", body)
    assert "tl.sum(" in _loop_free(source, "assign_plain_norms_centroid_norms")  # computed once, in launch 1


def _loop_free(source: str, kernel: str) -> str:
    fn = source[source.index(f"def {kernel}("):]
    return fn[:fn.index("\n\n\n")]


def test_a_power_of_two_static_dim_adds_no_pad_mask() -> None:
    body = _loop_body(_source("assign_plain"), "assign_plain_main")
    mask = re.search(r"mask\d+ = (.*)", body)
    assert mask is not None
    assert mask.group(1) == "(offs5 < K)[:, None] & pad2[None, :] if D_P2 != D else (offs5 < K)[:, None]"


PAIRS = """\
schedule pairs implements kmeans_assign
target sm_90a
param BN = 16 in {16}
dims M, static C
tensor g: in f32[M, C]
tensor lo: out f32[M]
tensor at: out i32[M]
tensor hi: out f32[M]
tensor ah: out i32[M]
grid tile in cdiv(M, BN)
role main: warps 4 {
  let gt: f32[BN, C] = load g[tile*BN : +BN, :] masked other 0
  store min(gt, axis=1) -> lo[tile*BN : +BN] masked
  store argmin(gt, axis=1) -> at[tile*BN : +BN] masked
  store max(gt, axis=1) -> hi[tile*BN : +BN] masked
  store argmax(gt, axis=1) -> ah[tile*BN : +BN] masked
}
"""


def _body(text: str) -> tuple[n.Stmt, ...]:
    return parse(text, "pairs.cake").launches[0].roles[0].body


def test_pairs_are_found_per_family_and_axis() -> None:
    assert paired(_body(PAIRS)) == {("min", "gt", 1), ("max", "gt", 1)}
    other_axis = PAIRS.replace("store argmax(gt, axis=1)", "store argmax(gt, axis=0)")
    assert paired(_body(other_axis)) == {("min", "gt", 1)}


def test_a_rebound_operand_or_a_nested_loop_is_never_paired() -> None:
    rebound = PAIRS.replace("  store argmin(gt, axis=1)", "  gt = gt + 1.0\n  store argmin(gt, axis=1)")
    assert ("min", "gt", 1) not in paired(_body(rebound))
    nested = PAIRS.replace("  store argmin(gt, axis=1) -> at[tile*BN : +BN] masked\n",
                           "  for j in 0 .. 1 {\n    store argmin(gt, axis=1) -> at[tile*BN : +BN] masked\n  }\n")
    assert ("min", "gt", 1) not in paired(_body(nested))


@pytest.mark.parametrize("c", [8, 5])  # a power of two, and a padded static dim (8 lanes, 5 real)
def test_the_fused_reduction_never_picks_nan_and_keeps_the_first_index(c: int) -> None:
    lowered = lower(parse(PAIRS, "pairs.cake"), "triton", filename="pairs.cake")
    assert lowered.source.count("tl.expand_dims(") == 2  # one index reduction per pair
    g = torch.tensor([[3.0, float("nan"), 1.0, 1.0, 2.0, 0.5, 7.0, 9.0][:c],
                      [float("nan")] * c,  # no number at all: the identity, index 0
                      [2.0, 2.0, float("nan"), 2.0, 2.0, 2.0, 2.0, 2.0][:c],
                      [float("nan"), 4.0, -0.0, 0.0, float("inf"), -1.0, -1.0, 3.0][:c],  # ties, -0 == +0
                      [float("inf"), float("nan"), float("inf"), float("nan"), float("inf"), 5.0, 5.0, 5.0][:c]]
                     * 6)
    lo, at, hi, ah = load(lowered)(g)
    finite = g.masked_fill(g.isnan(), float("inf"))  # (nan_to_num would also clip the infinities)
    below = g.masked_fill(g.isnan(), float("-inf"))
    want_at = finite.argmin(dim=1).to(torch.int32)
    want_ah = below.argmax(dim=1).to(torch.int32)
    all_nan = g.isnan().all(dim=1)
    want_at[all_nan] = 0
    want_ah[all_nan] = 0
    torch.testing.assert_close(at, want_at)
    torch.testing.assert_close(ah, want_ah)
    torch.testing.assert_close(lo, finite.min(dim=1).values)
    torch.testing.assert_close(hi, below.max(dim=1).values)


def test_the_launch_passes_the_pipelined_loops_stage_count() -> None:
    source = _source("assign_plain_norms", {"BN": 128, "BK": 128, "STAGES": 3, "WARPS": 8})
    launch = source[source.index("_k_compiled['assign']"):]
    assert "num_warps=8,\n            num_stages=3," in launch
    norms = source[source.index("_k_compiled['centroid_norms']"):source.index("_k_compiled['assign']")]
    assert "num_stages" not in norms  # no pipelined loop: Triton's default


UNTYPED = """\
schedule sums implements row_sum
target sm_90a
dtype T in {f16, bf16}
param BN = 16 in {16}
dims M, static C
tensor x: in T[M, C]
tensor y: out T[M]
grid tile in cdiv(M, BN)
role main: warps 4 {
  let xt: T[BN, C] = load x[tile*BN : +BN, :] masked other 0
  let s = sum(xt, axis=1)
  store s -> y[tile*BN : +BN] masked
}
"""


def test_a_let_without_a_type_holds_the_type_table_s_type() -> None:
    typed = UNTYPED.replace("let s = ", "let s: T[BN] = ")
    untyped_source = lower(parse(UNTYPED, "sums.cake"), "triton", filename="sums.cake").source
    typed_source = lower(parse(typed, "sums.cake"), "triton", filename="sums.cake").source
    assert "s = tl.sum(" in untyped_source and ".to(T)" in untyped_source  # f32 accumulation, rounded to T
    assert untyped_source == typed_source


def test_tiles_loaded_with_zero_padding_are_not_zeroed_again_before_the_mma_and_the_norm() -> None:
    body = _loop_body(_source("assign_plain"), "assign_plain_main")
    assert "tl.where(pad" not in body  # xt, ct and cf * cf are zero past D already: `masked other 0`


PADDED = """\
schedule padded implements row_sum
target sm_90a
param BN = 16 in {16}
dims M, static C
tensor g: in f32[M, C]
tensor sq: out f32[M]
tensor ones: out f32[M]
tensor bumped: out f32[M]
grid tile in cdiv(M, BN)
role main: warps 4 {
  let gt: f32[BN, C] = load g[tile*BN : +BN, :] masked other 0
  store sum(gt * gt, axis=1) -> sq[tile*BN : +BN] masked
  let one: f32[BN, C] = load g[tile*BN : +BN, :] masked other 1.0
  store sum(one, axis=1) -> ones[tile*BN : +BN] masked
  let acc: f32[BN, C] = load g[tile*BN : +BN, :] masked other 0
  acc = acc + 1.0
  store sum(acc, axis=1) -> bumped[tile*BN : +BN] masked
}
"""


@pytest.mark.parametrize("c", [8, 5])
def test_padding_is_zeroed_exactly_where_it_may_not_be_zero(c: int) -> None:
    lowered = lower(parse(PADDED, "padded.cake"), "triton", filename="padded.cake")
    wheres = [line for line in lowered.source.splitlines() if "tl.where(pad" in line]
    # `one` (other 1.0) and the reassigned `acc` are zeroed before their sums; `gt * gt` is not
    assert len(wheres) == 2 and all("gt" not in line for line in wheres)
    g = torch.randn(37, c, generator=torch.Generator().manual_seed(c))
    sq, ones, bumped = load(lowered)(g)
    torch.testing.assert_close(sq, (g * g).sum(1))
    torch.testing.assert_close(ones, g.sum(1))
    torch.testing.assert_close(bumped, (g + 1.0).sum(1))


ALONE = """\
schedule alone implements kmeans_assign
target sm_90a
param BN = 16 in {16}
dims M, static C
tensor g: in f32[M, C]
tensor at: out i32[M]
tensor ah: out i32[C]
grid tile in cdiv(M, BN)
role main: warps 4 {
  let gt: f32[BN, C] = load g[tile*BN : +BN, :] masked other 0
  store argmin(gt, axis=1) -> at[tile*BN : +BN] masked
  store argmax(gt, axis=0) -> ah[0 : +C] masked
}
"""


@pytest.mark.parametrize("c", [8, 5])
def test_an_unpaired_argmin_is_the_first_index_and_never_nan(c: int) -> None:
    """An argmin (argmax) with no `min` beside it: the same two reductions, along either axis."""
    lowered = lower(parse(ALONE, "alone.cake"), "triton", filename="alone.cake")
    assert "return_indices" not in lowered.source and "tl.argmin(" not in lowered.source
    g = torch.tensor([[3.0, float("nan"), 1.0, 1.0, 2.0, 0.5, 7.0, 9.0][:c],
                      [float("nan")] * c,
                      [float("inf"), 4.0, -0.0, 0.0, float("inf"), -1.0, -1.0, 3.0][:c],
                      [float("nan"), 4.0, 1.0, 0.0, float("inf"), -1.0, 9.0, 3.0][:c]] + [[0.25] * c] * 12)
    at, ah = load(lowered)(g)
    want_at = g.masked_fill(g.isnan(), float("inf")).argmin(dim=1).to(torch.int32)
    want_at[g.isnan().all(dim=1)] = 0
    torch.testing.assert_close(at, want_at)
    # one program per 16 rows: the column argmax of the first 16 rows (the only tile), NaN never the maximum
    torch.testing.assert_close(ah, g.masked_fill(g.isnan(), float("-inf")).argmax(dim=0).to(torch.int32))
