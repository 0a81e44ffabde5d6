"""What the Triton backend cannot express is refused with a located diagnostic, never simplified away:
first by the checker's capability checks (E06xx), and by the emitter (E0702) for what only it can see."""

from __future__ import annotations

import pytest
from cake.ir.parser import parse
from cake.lowering import codes
from cake.lowering.runtime import lower
from lowering_cases import REPO

from cake.diagnostics import DiagnosticError


def refusal(text: str) -> DiagnosticError:
    with pytest.raises(DiagnosticError) as raised:
        lower(parse(text, "k.cake"), "triton", filename="k.cake")
    return raised.value


def test_the_pingpong_schedule_is_refused_by_capability_checks() -> None:
    text = (REPO / "experiments" / "kmeans" / "assign_pingpong.cake").read_text()
    found = refusal(text).diagnostics
    assert {d.code for d in found} >= {"E0601", "E0602", "E0604", "E0605"}
    assert all(d.code.startswith("E06") and d.span is not None for d in found)


HALF_MAX = """
schedule half_max implements row_sum
target sm_90a
param BN = 32 in {32}
dims M, N
tensor x: in f16[M, N]
tensor y: out f16[M]
grid i in M, j in cdiv(N, BN)
role main: warps 4 {
  let xt: f16[BN] = load x[i, j*BN : +BN] masked other 0
  atomic max max(xt, axis=0) -> y[i]
}
"""


def test_the_emitter_refuses_what_triton_cannot_compile() -> None:
    (diagnostic,) = refusal(HALF_MAX).diagnostics
    assert diagnostic.code == codes.UNSUPPORTED
    assert diagnostic.message == "Triton has no f16 atomic max"
    assert diagnostic.span is not None and diagnostic.span.line == 11 and diagnostic.file == "k.cake"


def test_an_instruction_commitment_is_never_dropped() -> None:
    text = (REPO / "experiments" / "kmeans" / "assign_plain.cake").read_text()
    committed = text.replace("via dot", "via mma_sync.m16n8k16")
    codes_found = {d.code for d in refusal(committed).diagnostics}
    assert "E0605" in codes_found
