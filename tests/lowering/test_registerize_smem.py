"""registerize_smem: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.lowering.passes.registerize_smem import registerize_smem
from cake.lowering.pipeline import LowerContext
from lowering_cases import REPO

CTX = LowerContext("triton", "sm_80")

HEAD = """
schedule mm implements matmul
target sm_80
dtype T in {f16}
param BM = 32 in {32}
param BN = 32 in {32}
param BK = 16 in {16}
param STAGES = 3 in 1 .. 5
dims M, N, K
tensor a: in T[M, K]
tensor b: in T[K, N]
tensor c: out T[M, N]
grid i in cdiv(M, BM), j in cdiv(N, BN)
"""

BEFORE = HEAD + """
smem bs[STAGES]: T[BK, BN] swizzle 64B
role main: warps 4 {
  let acc: f32[BM, BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    let at: T[BM, BK] = load a[i*BM : +BM, k*BK : +BK] masked other 0
    copy b[k*BK : +BK, j*BN : +BN] -> bs[s] via cp_async masked
    acc = mma(at, bs[s], acc) via dot
  }
  store cast(acc, T) -> c[i*BM : +BM, j*BN : +BN] masked
}
"""

EXPECTED = HEAD + """
role main: warps 4 {
  let acc: f32[BM, BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    let at: T[BM, BK] = load a[i*BM : +BM, k*BK : +BK] masked other 0
    let bs: T[BK, BN] = load b[k*BK : +BK, j*BN : +BN] masked
    acc = mma(at, bs, acc) via dot
  }
  store cast(acc, T) -> c[i*BM : +BM, j*BN : +BN] masked
}
"""


def test_a_cp_async_stage_becomes_a_register_tile() -> None:
    assert registerize_smem(parse(BEFORE), CTX) == parse(EXPECTED)


def test_a_second_copy_in_scope_rebinds_the_tile() -> None:
    before = BEFORE.replace("    acc = mma(at, bs[s], acc) via dot\n",
                            "    acc = mma(at, bs[s], acc) via dot\n"
                            "    copy b[k*BK : +BK, j*BN : +BN] -> bs[s] via load masked\n")
    expected = EXPECTED.replace("    acc = mma(at, bs, acc) via dot\n",
                                "    acc = mma(at, bs, acc) via dot\n"
                                "    bs = load b[k*BK : +BK, j*BN : +BN] masked\n")
    assert registerize_smem(parse(before), CTX) == parse(expected)


def test_a_read_at_another_stage_keeps_the_buffer() -> None:
    before = BEFORE.replace("acc = mma(at, bs[s], acc)", "acc = mma(at, bs[0], acc)")
    assert registerize_smem(parse(before), CTX) == parse(before)


def test_tma_fed_buffers_are_left_for_the_capability_check() -> None:
    text = (REPO / "experiments" / "kmeans" / "assign_pingpong.cake").read_text()
    kernel = parse(text)
    assert registerize_smem(kernel, CTX) == kernel


def test_spans_survive_so_diagnostics_still_point_at_the_copy() -> None:
    out = registerize_smem(parse(BEFORE, "mm.cake"), CTX)
    loop = out.launches[0].roles[0].body[1]
    let = loop.body[1]  # type: ignore[attr-defined]
    copy_line = next(n for n, text in enumerate(BEFORE.splitlines(), start=1) if "copy b[" in text)
    assert let.span is not None and (let.span.line, let.span.column) == (copy_line, 5)
