"""`via dot.tf32x3` and `via dot.tf32`: the precision suffixes of `via dot` (cake.ir.dot_forms). Triton emits each
as tl.dot's `input_precision` of the same name (three TF32 tensor-core products; one) where plain `dot` emits
"ieee" (fp32 on the CUDA cores); the interpreter computes all of them in fp32, so the schedule's numerics are
checked on a CPU; an unknown suffix is the checker's E0503 with a location; the CUDA backend, whose dot takes
16-bit operands only, lowers a suffix as plain `dot`."""

from __future__ import annotations

import pytest
import torch
from cake.ir.dot_forms import dot_precision, is_dot
from cake.ir.parser import parse
from cake.lowering.runtime import load, lower
from lowering_cases import FIXTURES

from cake.diagnostics import DiagnosticError

MATMUL = (FIXTURES / "matmul_cp_async.cake").read_text()
SUFFIXES = ["tf32x3", "tf32"]


def with_suffix(text: str, suffix: str) -> str:
    return text.replace("acc = mma(at, bs[s], acc) via dot", f"acc = mma(at, bs[s], acc) via dot.{suffix}")


def test_dot_forms_are_recognised_and_their_precision_read() -> None:
    assert [dot_precision(f) for f in ("dot", "dot.tf32x3", "dot.tf32", "dot.tf16x5", "dot.", "wgmma.m64n128k16")] == \
        ["", "tf32x3", "tf32", None, None, None]
    assert is_dot("dot.tf16x5") and not is_dot("dotty") and not is_dot("mma_sync.m16n8k16")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_triton_emits_the_precision_only_where_the_form_asks_for_it(suffix: str) -> None:
    text = with_suffix(MATMUL, suffix)
    assert text != MATMUL
    split = lower(parse(text, "split.cake"), "triton", filename="split.cake").source
    plain = lower(parse(MATMUL, "plain.cake"), "triton", filename="plain.cake").source
    assert f'tl.dot(at, bs, acc=acc, input_precision="{suffix}")' in split and "ieee" not in split
    assert 'tl.dot(at, bs, acc=acc, input_precision="ieee")' in plain


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_form_runs_under_the_interpreter_in_fp32(suffix: str) -> None:
    text = with_suffix(MATMUL, suffix)
    kernel = load(lower(parse(text, "split.cake"), "triton", filename="split.cake"))
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(37, 40, generator=gen), torch.randn(40, 21, generator=gen)
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_an_unknown_precision_is_a_located_diagnostic() -> None:
    bad = MATMUL.replace("via dot", "via dot.tf16x5")
    with pytest.raises(DiagnosticError) as info:
        lower(parse(bad, "bad.cake"), "triton", filename="bad.cake")
    (diagnostic,) = [d for d in info.value.diagnostics if d.code == "E0503"]
    assert "dot.tf32x3" in diagnostic.message and "dot.tf32`" in diagnostic.message  # says which forms exist
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "dot.tf16x5" in text)
    assert diagnostic.span is not None and diagnostic.span.line == line


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_cuda_lowers_the_suffix_as_plain_dot_on_16_bit_operands(suffix: str) -> None:
    narrow = MATMUL.replace("dtype T in {f32, f16, bf16}", "dtype T in {f16, bf16}").replace("target sm_80",
                                                                                                "target sm_90a")
    split = narrow.replace("via dot\n", f"via dot.{suffix}\n")
    assert split != narrow
    sources = [lower(parse(text, "m.cake"), "cuda", filename="m.cake", params={}).source for text in (narrow, split)]
    assert sources[0] == sources[1]
