"""`defer ROLE best, besti` in the CUDA backend, read off generated source and compiled with nvcc (never run here):
the loop's reduction stays each thread's partial (no shuffle in the loop), the running pair is merged across the
quad once after it, a position the deferral does not carry is still merged in the loop, and every schedule the
`defer` operator changes compiles."""

from __future__ import annotations

import re

import pytest
from cake.ir.nodes import DType
from cake.ir.transforms.defer_merge import defer_merge
from cake.lowering.cuda.program import generate
from cuda_cases import HAVE_NVCC, NO_NVCC, compiled_child, edited, pass_children, read

PINGPONG = "experiments/kmeans/assign_pingpong.cake"
DEFER = ("  pingpong consumer around mma", "  pingpong consumer around mma\n  defer consumer best, besti")


def _consumer_loop_and_after(source: str) -> tuple[str, str]:
    """The consumer's k loop, and what follows it up to the store."""
    start = source.rindex("for (int k = 0;")
    found = re.compile(r"\n      // (deferred|@L\d+:\d+ arrive x_empty)").search(source, start)  # the loop's end
    assert found is not None
    return source[start:found.start()], source[found.start():source.index("store -> ids", found.start())]


def _source(*edits: tuple[str, str]) -> str:
    kernel, text = read(PINGPONG)
    for old, new in edits:
        kernel, text = edited(PINGPONG, old, new) if text == read(PINGPONG)[1] else _edit(text, old, new)
    return generate(kernel, kernel.target, dtypes={"T": DType.BF16}, static_dims={"D": 128}, file=PINGPONG).source


def _edit(text: str, old: str, new: str):  # type: ignore[no-untyped-def]
    from cake.ir.parser import parse

    assert text.count(old) == 1, old
    changed = text.replace(old, new)
    return parse(changed, PINGPONG), changed


def test_the_loop_keeps_partials_and_the_pair_is_merged_once_after_it() -> None:
    eager_loop, eager_after = _consumer_loop_and_after(_source())
    loop, after = _consumer_loop_and_after(_source(DEFER))
    assert eager_loop.count("__shfl_xor_sync") == 2 and "__shfl_xor_sync" not in eager_after
    assert "__shfl_xor_sync" not in loop and "cake_argmin_merge" not in loop
    assert after.count("__shfl_xor_sync") == 2 and "cake_argmin_merge(best[cake_q], besti[cake_q]" in after
    assert "m_i[cake_q] = Frag_assign_dot::col(m_i[cake_q], cake_wq, cake_lane);" in loop  # positions stay global


def test_a_minimum_deferred_without_its_position_leaves_the_position_merged_in_the_loop() -> None:
    # no running position: `i` (argmin) is still made, merged where it is, and the minimum merged after the loop
    loop, after = _consumer_loop_and_after(_source(("      besti = where(m < best, i, besti)\n", ""),
                                                   ("  pingpong consumer around mma",
                                                    "  pingpong consumer around mma\n  defer consumer best")))
    assert "cake_argmin_merge(" in loop
    assert "cake_argmin_merge(best[cake_q], best_pos[cake_q]" in after


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
@pytest.mark.parametrize("rel", pass_children(defer_merge), ids=lambda rel: rel.split("/")[-1])
def test_every_schedule_the_search_can_defer_compiles(rel: str) -> None:
    _, module = compiled_child(rel, defer_merge)
    assert module.cubin[:4] == b"\x7fELF" and all(k.spill_bytes == 0 for k in module.report.kernels)
