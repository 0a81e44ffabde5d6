"""scripts/kda_best_variant.py --per-launch: each launch's own params from the variant whose kernel of that launch
ran fastest, a param both launches read (C) left at its default, and the composed file checked and written."""

from __future__ import annotations

import json
from pathlib import Path

import kda_best_variant as best
import pytest
from cake.ir.parser import parse

STAGED = Path(__file__).resolve().parents[2] / "experiments" / "kda" / "kda_fused_staged.cake"
# ms of kernels per call [intra, recur] per variant; {"C": 16} is the fastest in total but binds a shared param
TIMES = {None: (1.8, 1.2), '{"BK": 32}': (1.5, 1.2), '{"BV": 16}': (1.8, 1.0), '{"C": 16}': (1.0, 1.1),
         '{"BK": 64, "BV": 64}': (1.6, 1.4)}


def _report() -> dict[str, object]:
    rows = {}
    for params, (intra, recur) in TIMES.items():
        name = "kda_fused_staged" if params is None else f"kda_fused_staged {params}"
        rows[name] = [{"kernel": "kda_fused_staged_intra", "ms_per_call": intra},
                      {"kernel": "kda_fused_staged_recur", "ms_per_call": recur}]
    return {"schedule": str(STAGED), "params": list(TIMES), "shapes": {"h96_fixed": rows}}


def test_each_launch_owns_the_params_only_it_reads() -> None:
    own = best.launch_params(STAGED.read_text(), str(STAGED))
    assert own == {"intra": {"BK", "WARPS_INTRA", "REGS_INTRA", "STAGES_INTRA"},
                   "recur": {"BV", "WARPS_RECUR", "REGS_RECUR", "STAGES_RECUR"}}


def test_per_launch_composes_each_launch_fastest_and_leaves_shared_params(tmp_path: Path) -> None:
    profile, out = tmp_path / "profile.json", tmp_path / "best.cake"
    profile.write_text(json.dumps(_report()))
    assert best.main([str(profile), "--shape", "h96_fixed", "--write", str(out), "--per-launch"]) == 0
    defaults = {p.name: p.default for p in parse(out.read_text(), str(out)).params}
    assert (defaults["BK"], defaults["BV"], defaults["C"]) == (32, 16, 32)
    # without --per-launch the fastest variant as a whole wins, shared param and all
    assert best.main([str(profile), "--shape", "h96_fixed", "--write", str(out)]) == 0
    assert {p.name: p.default for p in parse(out.read_text(), str(out)).params}["C"] == 16


def test_a_launch_without_a_profiled_kernel_is_an_error(tmp_path: Path) -> None:
    report = _report()
    for rows in report["shapes"]["h96_fixed"].values():  # type: ignore[index, attr-defined]
        rows.pop()
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(report))
    with pytest.raises(SystemExit, match="no variant of kda_fused_staged has a kernel of launch `recur`"):
        best.main([str(profile), "--write", str(tmp_path / "b.cake"), "--per-launch"])
