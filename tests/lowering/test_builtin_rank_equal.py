"""`rank_equal(k, axis=0)`, the stable rank among equal keys (how many earlier lanes of the vector hold the same
key), added by the builtin recipe in ir/README.md: typed and checked, lowered to Triton (a tile sort and a
segmented scan) and run under the interpreter against a plain Python count, and refused by the CUDA backend
with a located diagnostic (the checker's E0615 first, the code generator's C0100 behind it)."""

from __future__ import annotations

import pytest
import torch
from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.types import Type
from cake.ir.typing import type_kernel
from cake.lowering.runtime import load, lower

RANK = """\
schedule rank_keys implements rank_keys
target sm_90a

param BN = 16 in {16, 64, 128}
dims M

tensor keys: in i32[M]
tensor ranks: out i32[M]

grid tile in cdiv(M, BN)

role main: warps 4 {
  let k: i32[BN] = load keys[tile*BN : +BN] masked other 0
  store rank_equal(k, axis=0) -> ranks[tile*BN : +BN] masked
}
"""


def _errors(text: str, backend: str | None = None) -> list[str]:
    kernel = parse(text, "rank_keys.cake")
    found = check(kernel, arch="sm_90a", backend=backend) if backend else check(kernel, arch="sm_90a")
    return [d.code for d in found if d.severity.name == "ERROR"]


def _expected(keys: torch.Tensor, tile: int) -> torch.Tensor:
    """The count of earlier equal keys inside each tile of `tile` lanes, by definition."""
    out = torch.empty_like(keys)
    for i in range(keys.numel()):
        start = i - i % tile
        out[i] = int((keys[start:i] == keys[i]).sum())
    return out


def test_types_as_an_i32_vector_of_the_keys_shape() -> None:
    kernel = parse(RANK, "rank_keys.cake")
    assert _errors(RANK) == []
    calls = [e for site in an.walk_body(kernel.launches[0].roles[0].body) for top in an.stmt_exprs(site.stmt)
             for e in an.walk_expr(top) if isinstance(e, n.Call) and e.func == "rank_equal"]
    assert type_kernel(kernel).of(calls[0]) == Type(n.DType.I32, (n.Name("BN"),))


@pytest.mark.parametrize(("bad", "code"), [
    ("rank_equal(k, axis=0)", None),
    ("rank_equal(cast(k, f32), axis=0)", "E0103"),  # keys are i32
    ("rank_equal(k[:, None], axis=0)", "E0201"),  # one vector at a time
    ("rank_equal(k, axis=1)", "E0203"),  # a vector has axis 0 only
    ("rank_equal(k)", "E0104"),  # axis= is required
])
def test_argument_errors(bad: str, code: str | None) -> None:
    assert _errors(RANK.replace("rank_equal(k, axis=0)", bad)) == ([code] if code else [])


def test_the_cuda_backend_refuses_it_where_it_is_written() -> None:
    kernel = parse(RANK, "rank_keys.cake")
    found = [d for d in check(kernel, arch="sm_90a", backend="cuda") if d.code == "E0615"]
    assert len(found) == 1 and found[0].span is not None and found[0].span.line == 14
    assert "--backend triton" in (found[0].help or "")


def test_the_cuda_code_generator_refuses_it_located() -> None:
    """Behind the checker: the generator itself (which does not run the checks) refuses with C0100, located."""
    from cake.lowering.cuda.errors import LoweringError
    from cake.lowering.cuda.program import generate

    with pytest.raises(LoweringError) as raised:
        generate(parse(RANK, "rank_keys.cake"), "sm_90a", file="rank_keys.cake")
    assert [(d.code, d.span.line if d.span else None) for d in raised.value.diagnostics] == [("C0100", 14)]


def test_lowering_for_cuda_stops_at_the_check() -> None:
    from cake.diagnostics import DiagnosticError

    with pytest.raises(DiagnosticError) as raised:
        lower(parse(RANK, "rank_keys.cake"), "cuda", filename="rank_keys.cake")
    assert [(d.code, d.span.line if d.span else None) for d in raised.value.diagnostics] == [("E0615", 14)]


CASES = [
    (37, 16, 0, 3),        # a padded tail tile, many repeats
    (128, 64, -5, 5),      # negative keys sort below the positions packed under them
    (300, 128, 0, 300),    # mostly distinct keys
    (128, 128, 7, 8),      # one key everywhere: ranks 0 .. n-1
    (1, 16, -(2**31), 2**31 - 1),  # one lane, an extreme key
]


def _keys(m: int, bn: int, low: int, high: int) -> torch.Tensor:
    keys = torch.randint(low, high, (m,), generator=torch.Generator().manual_seed(m + bn), dtype=torch.int32)
    keys[::7] = torch.iinfo(torch.int32).min if low < 0 else low  # the extremes of the key range, repeated
    keys[3::11] = torch.iinfo(torch.int32).max if high > 2**30 else high - 1
    return keys


@pytest.mark.parametrize(("m", "bn", "low", "high"), CASES)
def test_triton_lowering_matches_the_definition(interpreter: None, m: int, bn: int, low: int, high: int) -> None:
    fn = load(lower(parse(RANK, "rank_keys.cake"), "triton", params={"BN": bn}, filename="rank_keys.cake"))
    keys = _keys(m, bn, low, high)
    assert torch.equal(fn(keys), _expected(keys, bn))


@pytest.mark.parametrize(("m", "bn", "low", "high"), [c for c in CASES if c[1] <= 64])
def test_the_gpu_helpers_give_the_same_ranks_under_the_interpreter(interpreter: None, m: int, bn: int, low: int,
                                                                   high: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated module sorts with tl.sort and counts runs with tl.associative_scan when compiled, and with
    whole-tile equivalents under the interpreter (module.py says why): the compiled pair, run here by the
    interpreter (slowly, so on small tiles), gives the same ranks."""
    import sys

    fn = load(lower(parse(RANK, "rank_keys.cake"), "triton", params={"BN": bn}, filename="rank_keys.cake"))
    module = sys.modules[fn.fn.__module__]
    assert module._k_sort is module._k_sort_network  # the interpreter's pair, by default
    monkeypatch.setattr(module, "_k_sort", module._k_sort_triton)
    monkeypatch.setattr(module, "_k_run_length", module._k_run_length_triton)
    keys = _keys(m, bn, low, high)
    assert torch.equal(fn(keys), _expected(keys, bn))
