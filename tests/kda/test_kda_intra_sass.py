"""The CPU tools behind issue 14's intra variants: scripts/aot_kda_sass.py (a launch's SASS cut at its loops and
counted by class, per program with the loops' trip counts) on a hand-written listing, and
scripts/kda_best_variant.py (the fastest profiled variant written out as the schedule's defaults, checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aot_kda_sass as sass
import kda_best_variant as best
import pytest
from cake.experiments.kda.workload import FORWARD
from cake.ir.parser import parse

SCHEDULE = FORWARD.folder / "kda_fused_chunkpar.cake"
# a prologue of 2, a loop body of 4 (one tensor-core product, one barrier, a branch back), an epilogue of 2
LISTING = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0020*/                   HMMA.1684.F32.TF32 R4, R8, R12, R4 ;
        /*0030*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0040*/                   MUFU.EX2 R5, R5 ;
        /*0050*/               @P0 BRA 0x20 ;
        /*0060*/                   STG.E desc[UR4][R2.64], R4 ;
        /*0070*/                   EXIT ;
"""


def test_a_listing_is_cut_at_its_loop_and_counted_per_program() -> None:
    parts = sass.regions(sass.instructions(LISTING))
    assert [(r.start, r.end, r.loop, r.total) for r in parts] == [(0, 0x20, False, 2), (0x20, 0x60, True, 4),
                                                                   (0x60, 0x80, False, 2)]
    assert parts[1].classes["hmma"] == 1 and parts[1].classes["bar"] == 1 and parts[1].classes["mufu"] == 1
    each = sass.per_program(parts, [5])
    assert each["total"] == 2 + 5 * 4 + 2 and each["hmma"] == 5 and each["bar"] == 5 and each["global"] == 2


# an outer loop (0x10 .. 0x70) holding a straight stretch and an inner loop (0x30 .. 0x50): Triton's code for a
# schedule's nested `for` (kda_fused_chunk64.cake's block-rows inside intra's K slices)
NESTED = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0020*/                   MUFU.EX2 R5, R5 ;
        /*0030*/                   HMMA.1684.F32.TF32 R4, R8, R12, R4 ;
        /*0040*/               @P1 BRA 0x30 ;
        /*0050*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0060*/               @P0 BRA 0x10 ;
        /*0070*/                   EXIT ;
"""


def test_a_nested_loop_is_counted_per_entry_of_its_outer_loop() -> None:
    parts = sass.regions(sass.instructions(NESTED))
    assert [(r.start, r.end, r.within, r.total) for r in parts] == [
        (0, 0x10, (), 1), (0x10, 0x30, (0,), 2), (0x30, 0x50, (0, 1), 2), (0x50, 0x70, (0,), 2), (0x70, 0x80, (), 1)]
    each = sass.per_program(parts, [3, 4])  # 3 outer trips, 4 inner trips per entry
    assert each["total"] == 1 + 3 * 2 + 12 * 2 + 3 * 2 + 1 and each["hmma"] == 12 and each["mufu"] == 3
    assert each["bar"] == 3 and each["global"] == 3


def test_overlapping_loops_are_refused() -> None:
    crossing = NESTED.replace("@P0 BRA 0x10", "@P0 BRA 0x40")  # a loop 0x40 .. 0x70 crossing 0x30 .. 0x50
    with pytest.raises(ValueError, match="overlapping loops at 0x40"):
        sass.loops(sass.instructions(crossing))


def test_trip_counts_must_name_every_loop() -> None:
    with pytest.raises(ValueError, match="2 counts for 1 loops"):
        sass.per_program(sass.regions(sass.instructions(LISTING)), [4, 4])


def _report(tmp_path: Path) -> Path:
    rows = {"kda_fused_chunkpar {}": [{"ms_per_call": 4.9}, {"ms_per_call": 3.4}],
            'kda_fused_chunkpar {"STAGES_INTRA": 2, "REGS_INTRA": 168}': [{"ms_per_call": 3.0}, {"ms_per_call": 3.4}]}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"schedule": str(SCHEDULE), "params": ["{}", '{"STAGES_INTRA": 2, "REGS_INTRA": 168}'],
                                "shapes": {"h96_fixed": rows}}))
    return path


def test_the_fastest_variant_becomes_the_defaults_of_a_checked_copy(tmp_path: Path) -> None:
    out = tmp_path / "best.cake"
    assert best.main([str(_report(tmp_path)), "--write", str(out)]) == 0
    defaults = {p.name: p.default for p in parse(out.read_text(), str(out)).params}
    original = {p.name: p.default for p in parse(SCHEDULE.read_text(), str(SCHEDULE)).params}
    assert {name: v for name, v in defaults.items() if original[name] != v} == {"STAGES_INTRA": 2, "REGS_INTRA": 168}


def test_a_winner_outside_a_params_domain_is_refused(tmp_path: Path) -> None:
    report = json.loads(_report(tmp_path).read_text())
    report["params"].append('{"REGS_INTRA": 100}')
    report["shapes"]["h96_fixed"]['kda_fused_chunkpar {"REGS_INTRA": 100}'] = [{"ms_per_call": 1.0}]
    (tmp_path / "bad.json").write_text(json.dumps(report))
    with pytest.raises(SystemExit, match="do not check"):
        best.main([str(tmp_path / "bad.json"), "--write", str(tmp_path / "best.cake")])
    assert not (tmp_path / "best.cake").exists()


@pytest.mark.slow
def test_one_stage_intra_issues_fewer_instructions_and_barriers(tmp_path: Path) -> None:
    # The script end to end (a process without TRITON_INTERPRET: Triton's compiler cannot run under it), on the
    # claim the schedule's STAGES_INTRA comment makes: intra's K-slice loops at one stage issue fewer instructions
    # and block barriers per program than at Triton's default three, with the same tensor-core products.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "sass.json"
    proc = subprocess.run([sys.executable, str(Path(sass.__file__)), "--out", str(out), "--trips", "4,4,4",
                           "--params", '{"BK": 32, "STAGES_INTRA": 3, "REGS_INTRA": 255}',
                           '{"BK": 32, "STAGES_INTRA": 1, "REGS_INTRA": 255}'], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    staged, single = (v["per_program"] for v in json.loads(out.read_text())["variants"])
    assert single["hmma"] == staged["hmma"] > 0
    assert single["total"] < staged["total"] and single["bar"] < staged["bar"], (staged, single)
