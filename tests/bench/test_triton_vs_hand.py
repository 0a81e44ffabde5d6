"""The CPU paths of the lowered-vs-hand-written Triton assign comparison (issue 17, item 4): the GPU script's
dry run (every contestant lowered, loaded and checked against the fp64 reference under the interpreter), its
aggregation of process payloads into the ratio with an interval, and the AOT script's loop finder."""

from __future__ import annotations

import json
from pathlib import Path

import aot_triton_vs_hand as aot
import gpu_triton_vs_hand as vs

from cake.repeated import process_payload
from cake.stats import ProcessSamples


def test_the_dry_run_lowers_checks_and_runs_every_contestant(tmp_path: Path, capsys) -> None:
    assert vs.main(["--out", str(tmp_path), "--dry-run", "--config", "32,16,2,2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in ("lowered_plain", "lowered_norms", "hand_triton", "hand_triton_whole"):
        assert any(line.split() == [name, "ok"] for line in lines), name
    assert json.loads((tmp_path / "resources.json").read_text()) == {}  # the interpreter compiles nothing


def _payload(index: int, plain: float, norms: float, hand: float) -> dict:
    times = {"lowered_plain": [plain + 0.001 * (i % 3) for i in range(12)],
             "lowered_norms": [norms + 0.001 * (i % 2) for i in range(12)],
             "hand_triton": [hand] * 12, "hand_triton_whole": [hand + 0.2] * 12,
             "lowered_plain@graph": [plain - 0.05] * 12, "lowered_norms@graph": [norms - 0.05] * 12,
             "hand_triton@graph": [hand - 0.02] * 12}
    return process_payload(index, 0, {"device": "scripted"}, {vs.OP: {"cake_cell": ProcessSamples(times, {})}})


def test_the_aggregate_is_each_lowered_kernel_over_the_hand_written_one(tmp_path: Path, capsys) -> None:
    for i in range(3):
        (tmp_path / f"process_{i}.json").write_text(json.dumps(_payload(i, 2.0, 1.16, 1.13)))
    assert vs.main(["--out", str(tmp_path), "--aggregate-only", "--graphs", "--resamples", "200"]) == 0
    result = json.loads((tmp_path / "vs_hand.json").read_text())
    speedup = result["headlines"][vs.OP]["cake_cell"]["speedup"]
    assert abs(speedup["lowered_plain"]["value"] - 1.13 / 2.0) < 0.01
    assert speedup["lowered_norms"]["best_baseline"] == "hand_triton"  # the whole call is a reference, not a bar
    out = capsys.readouterr().out
    assert "lowered_norms / hand_triton = 0.97" in out and "meets the goal" in out
    assert "lowered_plain / hand_triton = 0.56" in out and "misses the goal" in out
    graphed = result["device_time_headlines"][vs.OP]["cake_cell"]["speedup"]["lowered_norms@graph"]
    assert graphed["best_baseline"] == "hand_triton@graph" and abs(graphed["value"] - 1.11 / 1.11) < 0.01
    assert "lowered_norms@graph / hand_triton@graph = 1.00" in out


SASS = """\
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   FFMA R2, R3, R4, R5 ;
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ ;
        /*0030*/                   FMNMX R6, R6, +INF , PT ;
        /*0040*/              @!P0 BRA 0x10 ;
        /*0050*/                   FADD R7, R7, R8 ;
        /*0060*/                   BRA 0x50 ;
"""


def test_the_loop_is_the_backward_branch_around_the_tensor_core_instruction() -> None:
    count, ops = aot.loop_opcodes(SASS)
    assert count == 4 and ops == {"FFMA": 1, "HGMMA": 1, "FMNMX": 1, "BRA": 1}
