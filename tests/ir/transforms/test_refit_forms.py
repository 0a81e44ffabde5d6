"""refit_forms: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from cake.ir.parser import parse
from cake.ir.transforms.refit_forms import refit_forms, wgmma_n

BEFORE = """
schedule s implements matmul
target sm_90a
param BM = 128 in {64, 128}
param BN = 64 in {64, 96, 128, 256}
dims M, N, static K
tensor a: in f16[M, K]
tensor b: in f16[N, K]
tensor out: out f32[M, N]
grid tm in cdiv(M, BM), tn in cdiv(N, BN)
smem as_: f16[BM, K]
smem bs: f16[BN, K]
role main: warpgroups 2 {
  copy a[tm*BM : +BM, :] -> as_ via load masked
  copy b[tn*BN : +BN, :] -> bs via load masked
  sync
  let acc: f32[BM, BN] = mma(as_, bs.T) via wgmma.m64n128k16
  let other: f32[BM, BN] = mma(as_, bs.T) via dot
  store acc + other -> out[tm*BM : +BM, tn*BN : +BN] masked
}
"""


def test_a_wgmma_form_follows_its_tile_to_the_widest_n_that_divides_it() -> None:
    expected = BEFORE.replace("via wgmma.m64n128k16", "via wgmma.m64n64k16")
    assert refit_forms(parse(BEFORE)) == parse(expected)


def test_columns_of_96_take_n96() -> None:
    before = BEFORE.replace("param BN = 64", "param BN = 96")
    assert refit_forms(parse(before)) == parse(before.replace("wgmma.m64n128k16", "wgmma.m64n96k16"))


def test_forms_that_fit_and_other_families_are_left_alone() -> None:
    fitted = BEFORE.replace("param BN = 64", "param BN = 128")
    assert refit_forms(parse(fitted)) is None


def test_widest_n() -> None:
    assert (wgmma_n(64), wgmma_n(96), wgmma_n(512), wgmma_n(4)) == (64, 96, 256, None)
