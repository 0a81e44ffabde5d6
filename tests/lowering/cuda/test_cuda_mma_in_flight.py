"""A wgmma's wait is deferred past the `let`s after it that do not read its result (`RoleGen.finish_mma`), so
CUDA-core work independent of the product runs while the tensor cores compute it: the one-launch ping-pong's
||c||^2 row sum over the centroid tile that also feeds its product. Anything else completes the product first:
a `let` that reads it, an arrive (which may free the operands' stage), the end of the loop body."""

from __future__ import annotations

import pytest
from cake.lowering.cuda.program import generate
from cuda_cases import HAVE_NVCC, NO_NVCC, compiled, edited, program

FUSED = "experiments/kmeans/assign_pingpong_fused.cake"
ROW_SUM = """      let cf: f32[BK, D] = cast(cs[s], f32)
      let cn: f32[BK] = sum(cf * cf, axis=1)
      arrive c_empty[s]
"""


def consumer_loop(source: str) -> str:
    """The consumer's text from its product's hand-off to the end of its first epilogue statement."""
    start = source.index("// hand the tensor cores on")
    return source[start:source.index("// @L63:7 let m", start)]


def test_the_row_sum_runs_while_the_product_is_in_flight() -> None:
    loop = consumer_loop(program(FUSED).source)
    wait = loop.index("cake_wgmma_wait<0>();")
    assert loop.index("// @L58:7 let cf") < loop.index("butterfly step 1") < wait  # the sum, then the wait
    assert wait < loop.index("// @L60:7 arrive c_empty")  # the stage is freed only after the product read it
    assert loop.count("cake_wgmma_wait<0>();") == 1


def test_an_arrive_or_a_reader_completes_the_product_first() -> None:
    """With the row sum moved after the arrive, nothing may overlap: the wait follows the hand-off at once."""
    kernel, _ = edited(FUSED, ROW_SUM, ROW_SUM.replace("      arrive c_empty[s]\n", "").replace(
        "      let cf", "      arrive c_empty[s]\n      let cf"))
    loop = consumer_loop(generate(kernel, "sm_90a", file=FUSED).source)
    before_wait = loop[:loop.index("cake_wgmma_wait<0>();")]
    assert "// @L" not in before_wait, before_wait


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_ptxas_keeps_the_product_asynchronous() -> None:
    """ptxas serializes a wgmma whose accumulator registers it cannot prove untouched before the wait, and says so
    in its log; the deferred wait must not cost that (nor a stack or spills)."""
    module = compiled(FUSED)
    assert "serializ" not in module.log.lower()
    assert [(k.stack_frame_bytes, k.spill_bytes) for k in module.report.kernels] == [(0, 0)]
