"""The builtins added by the recipe in ir/README.md ("Adding a builtin"): `cumsum` along either axis of a tile
(a row of the table since phase 1, now lowered by both backends) and `tril(n, diagonal=d)`.

Each is checked, lowered to Triton and run under the interpreter against torch, and lowered to CUDA and
compiled with nvcc (skipped, never passed, without nvcc)."""

from __future__ import annotations

import shutil

import pytest
import torch
from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.builtins import BUILTINS, missing_emitters
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.types import Type
from cake.ir.typing import type_kernel
from cake.lowering.runtime import load, lower

SCAN = """\
schedule chunk_scan implements chunk_scan
target sm_90a

param BT = 16 in {16, 32}
dims M, static C

tensor g: in f32[M, C]
tensor x: in f32[M]
tensor rows: out f32[M, C]
tensor cols: out f32[M, C]
tensor seq: out f32[M]
tensor tri: out f32[M]
tensor ex: out f32[M]

grid tile in cdiv(M, BT)

role main: warps 4 {
  let gt: f32[BT, C] = load g[tile*BT : +BT, :] masked other 0
  store cumsum(gt, axis=1) -> rows[tile*BT : +BT, :] masked
  store cumsum(gt, axis=0) -> cols[tile*BT : +BT, :] masked
  let xt: f32[BT] = load x[tile*BT : +BT] masked other 0
  store cumsum(xt, axis=0) -> seq[tile*BT : +BT] masked
  store sum(where(tril(BT), xt[None, :], 0.0), axis=1) -> tri[tile*BT : +BT] masked
  store sum(where(tril(BT, diagonal=-1), xt[None, :], 0.0), axis=1) -> ex[tile*BT : +BT] masked
}
"""


def _chunked_cumsum(t: torch.Tensor, chunk: int) -> torch.Tensor:
    out = torch.empty_like(t)
    for start in range(0, t.shape[0], chunk):
        out[start:start + chunk] = t[start:start + chunk].cumsum(0)
    return out


def test_every_builtin_has_an_emitter_in_each_backend() -> None:
    import cake.lowering.cuda.exprs  # noqa: F401  (registers the CUDA rules)
    import cake.lowering.triton.calls  # noqa: F401  (registers the Triton rules)

    assert missing_emitters("triton") == ()
    assert missing_emitters("cuda") == ()
    assert {"cumsum", "tril"} <= set(BUILTINS)


def test_tril_and_cumsum_type_and_check() -> None:
    kernel = parse(SCAN, "chunk_scan.cake")
    assert not [d for d in check(kernel, arch="sm_90a") if d.severity.name == "ERROR"]
    typing = type_kernel(kernel)
    calls = {c.func + ("-1" if c.kwargs and c.kwargs[0].name == "diagonal" else ""): typing.of(c)
             for c in _calls(kernel)}
    bt = n.Name("BT")
    assert calls["tril"] == Type(n.DType.BOOL, (bt, bt))
    assert calls["tril-1"] == Type(n.DType.BOOL, (bt, bt))
    assert typing.of(_calls(kernel)[0]) == Type(n.DType.F32, (bt, n.Name("C")))


def _calls(kernel: n.Kernel) -> list[n.Call]:
    return [e for site in an.walk_body(kernel.launches[0].roles[0].body) for top in an.stmt_exprs(site.stmt)
            for e in an.walk_expr(top) if isinstance(e, n.Call)]


@pytest.mark.parametrize(("bad", "code"), [
    ("tril(BT)", None),
    ("tril(xt)", "E0201"),
    ("tril(BT, axis=1)", "E0104"),
    ("tril(BT, diagonal=xt)", "E0201"),
])
def test_tril_argument_errors(bad: str, code: str | None) -> None:
    text = SCAN.replace("where(tril(BT), xt", f"where({bad}, xt")
    codes = [d.code for d in check(parse(text, "chunk_scan.cake"), arch="sm_90a") if d.severity.name == "ERROR"]
    assert codes == ([code] if code else [])  # one mistake, one diagnostic


@pytest.mark.parametrize(("m", "c", "bt"), [(37, 5, 16), (64, 8, 32), (1, 1, 16)])
def test_triton_lowering_matches_torch(m: int, c: int, bt: int) -> None:
    lowered = lower(parse(SCAN, "chunk_scan.cake"), "triton", params={"BT": bt}, filename="chunk_scan.cake")
    fn = load(lowered)
    gen = torch.Generator().manual_seed(m * 100 + c)
    g = torch.randn(m, c, generator=gen)
    x = torch.randn(m, generator=gen)
    rows, cols, seq, tri, ex = fn(g, x)
    torch.testing.assert_close(rows, g.cumsum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cols, _chunked_cumsum(g, bt), rtol=1e-5, atol=1e-5)
    want = _chunked_cumsum(x, bt)
    torch.testing.assert_close(seq, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tri, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ex, want - x, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here: nothing is marked compiled "
                    "that was not compiled")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_lowering_compiles(arch: str) -> None:
    from cake.lowering.cuda.compile import compile_cubin
    from cake.lowering.cuda.program import generate

    prog = generate(parse(SCAN, "chunk_scan.cake"), arch, static_dims={"C": 5}, file="chunk_scan.cake")
    assert "__shfl_up_sync" in prog.source  # the scan
    assert "<= (" in prog.source and ") + (-1)" in prog.source  # both tril masks, the second below the diagonal
    module = compile_cubin(prog.source, prog.arch, smem_dynamic_bytes={c.kname: c.smem_bytes for c in prog.launches},
                           tmem_columns={c.kname: c.tmem_columns for c in prog.launches}, file="chunk_scan.cake")
    assert module.cubin[:4] == b"\x7fELF"
