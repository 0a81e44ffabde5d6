"""Checker diagnostics as a user sees them: exact line, column and text, and no internal path leaks."""

from __future__ import annotations

import re

import pytest
from cake.ir.check import check_text
from cake.ir.checks.fixtures import PINGPONG, PLAIN
from cake.ir.checks.registry import all_checks

from cake.diagnostics import render, render_all


def _only(text: str, code: str, **kwargs):
    found = [d for d in check_text(text, "kernel.cake", **kwargs) if d.code == code]
    assert len(found) == 1, found
    return found[0]


def test_arrival_count_points_at_the_declared_count() -> None:
    text = PINGPONG.replace("mbarrier c_empty[STAGES] arrivals 2 free", "mbarrier c_empty[STAGES] arrivals 1 free")
    d = _only(text, "E0402")
    assert (d.span.line, d.span.column) == (19, 35)
    assert d.subject == "mbarrier `c_empty`"
    assert render(d, text) == (
        "error[E0402]: arrival count of `c_empty`: declared 1, but 2 arrive per phase\n"
        "  --> kernel.cake:19:35\n"
        "    |\n"
        " 19 | mbarrier c_empty[STAGES] arrivals 1 free\n"
        "    |                                   ^ declared 1, 2 arrive per phase\n"
        "   = note: arriving instances: consumer[0], consumer[1]\n"
        "   = help: declare `arrivals 2`"
    )


def test_register_budget_names_the_role_the_total_and_the_limit() -> None:
    text = PINGPONG.replace("warpgroups 1, regs 232", "warpgroups 1, regs 240")
    d = _only(text, "E0302")
    assert (d.span.line, d.span.column) == (31, 43)
    assert d.subject == "role `consumer`"
    assert render(d, text) == (
        "error[E0302]: register file over budget in launch `main`: 66,560 registers > 64,512 the block holds (384 "
        "threads x 168 at launch; setmaxnreg only moves registers between its warpgroups)\n"
        "  --> kernel.cake:31:43\n"
        "    |\n"
        " 31 | role consumer[w in 2]: warpgroups 1, regs 240 {\n"
        "    |                                           ^^^ 66,560 registers > 64,512 the block holds (384 threads x "
        "168 at launch; setmaxnreg only moves registers between its warpgroups)\n"
        "   = note: per role: producer: 1 x 128 threads x 40; consumer: 2 x 128 threads x 240\n"
        "   = help: lower `regs` of role `consumer` (61,440 registers in all)"
    )


def test_unmasked_tail_points_at_the_slice() -> None:
    text = PLAIN.replace("let ct: T[BK, 128] = load c[b, k*BK : +BK, :] masked other 0",
                         "let ct: T[BK, 128] = load c[b, k*BK : +BK, :]")
    d = _only(text, "E0202")
    assert (d.span.line, d.span.column, d.span.end_column) == (17, 36, 46)
    assert render(d, text) == (
        "error[E0202]: unmasked tile of `c` along `K`: +BK may not divide it, so the last tile reads out of bounds\n"
        "  --> kernel.cake:17:36\n"
        "    |\n"
        " 17 |     let ct: T[BK, 128] = load c[b, k*BK : +BK, :]\n"
        "    |                                    ^^^^^^^^^^ +BK may not divide `K`\n"
        "   = help: add `masked` to the statement so the tail tile is bounds-checked"
    )


def test_tx_mismatch_names_the_domain_point() -> None:
    text = PINGPONG.replace("tx BK*128*sizeof(T) + BK*4", "tx 128*128*sizeof(T) + BK*4")
    d = _only(text, "E0403")
    assert (d.span.line, d.span.column) == (18, 39)
    assert d.label == "declared 33,792 bytes, copies move 66,560 at BK = 256, T = f16"


def test_undefined_name_is_reported_once_with_a_use_count() -> None:
    text = PLAIN.replace("param BK = 64 in {32, 64, 128}\n", "")
    found = [d for d in check_text(text, "kernel.cake") if d.code == "E0101"]
    assert len(found) == 1
    assert (found[0].span.line, found[0].span.column) == (15, 25)
    assert found[0].message == "undefined name `BK` in role `main`"
    assert found[0].label == "not declared (12 uses)"


def test_deadlock_explains_the_cycle() -> None:
    text = PINGPONG.replace("mbarrier c_empty[STAGES] arrivals 2 free", "mbarrier c_empty[STAGES] arrivals 2")
    d = _only(text, "E0404")
    assert (d.span.line, d.span.column) == (26, 5)
    assert d.message == ("deadlock: a circular wait through producer waits c_empty[s] -> "
                         "consumer[0] waits c_full[s]")
    assert d.help == "if `c_empty` starts released (a producer's first wait), declare it `free`"


_LEAKS = re.compile(r"/work/|site-packages|\.py\b|Traceback|File \"|0x[0-9a-f]{6,}")


@pytest.mark.parametrize("spec", all_checks(), ids=lambda s: s.id)
def test_no_internal_path_leaks_into_any_check_output(spec) -> None:
    for example in spec.examples:
        diagnostics = check_text(example.text, "kernel.cake", arch=example.arch, backend=example.backend)
        text = render_all(diagnostics, example.text)
        assert not _LEAKS.search(text), text
        assert all(d.file == "kernel.cake" for d in diagnostics)
