"""commit_wgmma and narrow_dtypes: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.ir.transforms.commit_wgmma import commit_wgmma
from cake.ir.transforms.narrow_dtypes import narrow_dtypes

BEFORE = """
schedule s implements matmul
target sm_90a
dtype T in {f32, f16, bf16}
param BM = 128 in {32, 64, 128}
param BN = 64 in {8, 64, 100, 128}
dims M, N, static K
tensor a: in T[M, K]
tensor b: in T[N, K]
tensor out: out f32[M, N]
grid tm in cdiv(M, BM), tn in cdiv(N, BN)
smem as_: T[BM, K] swizzle 128B
smem bs: T[BN, K] swizzle 128B
role main: warps 8 {
  copy a[tm*BM : +BM, :] -> as_ via load masked
  copy b[tn*BN : +BN, :] -> bs via load masked
  sync
  let acc: f32[BM, BN] = mma(as_, bs.T) via dot
  store acc -> out[tm*BM : +BM, tn*BN : +BN] masked
}
"""

# The widest table N that tiles 64 columns; the role in warpgroups; T without f32; BM keeps multiples of 64;
# BN keeps the widths some wgmma form tiles (100 has none). Defaults stay where they were.
EXPECTED = """
schedule s implements matmul
target sm_90a
dtype T in {f16, bf16}
param BM = 128 in {64, 128}
param BN = 64 in {8, 64, 128}
dims M, N, static K
tensor a: in T[M, K]
tensor b: in T[N, K]
tensor out: out f32[M, N]
grid tm in cdiv(M, BM), tn in cdiv(N, BN)
smem as_: T[BM, K] swizzle 128B
smem bs: T[BN, K] swizzle 128B
role main: warpgroups 2 {
  copy a[tm*BM : +BM, :] -> as_ via load masked
  copy b[tn*BN : +BN, :] -> bs via load masked
  sync
  let acc: f32[BM, BN] = mma(as_, bs.T) via wgmma.m64n64k16
  store acc -> out[tm*BM : +BM, tn*BN : +BN] masked
}
"""


def test_an_mma_over_shared_operands_becomes_wgmma() -> None:
    assert commit_wgmma(parse(BEFORE)) == parse(EXPECTED)
    assert commit_wgmma(parse(BEFORE), "acc") == parse(EXPECTED)


def test_what_cannot_be_wgmma_is_left_alone() -> None:
    assert commit_wgmma(parse(EXPECTED)) is None  # already committed
    assert commit_wgmma(parse(BEFORE.replace("target sm_90a", "target sm_80"))) is None  # no wgmma on sm_80
    assert commit_wgmma(parse(BEFORE.replace("param BM = 128", "param BM = 32"))) is None  # rows not 64k
    assert commit_wgmma(parse(BEFORE.replace("warps 8", "warps 6"))) is None  # not whole warpgroups
    fixed32 = BEFORE.replace("smem bs: T[BN, K]", "smem bs: f32[BN, K]").replace("tensor b: in T", "tensor b: in f32")
    assert commit_wgmma(parse(fixed32)) is None  # a 32-bit operand no k16 form takes


def test_narrow_dtypes_keeps_the_16_bit_choices() -> None:
    narrowed = narrow_dtypes(parse(BEFORE), {"T"})
    assert narrowed == parse(BEFORE.replace("dtype T in {f32, f16, bf16}", "dtype T in {f16, bf16}"))
    assert narrow_dtypes(narrowed, {"T"}) is None  # nothing to do
    assert narrow_dtypes(parse(BEFORE.replace("{f32, f16, bf16}", "{f32}")), {"T"}) is None  # nothing would be left
