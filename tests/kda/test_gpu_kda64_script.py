"""The CPU paths of scripts/gpu/s9_kda64.sh (the chunk-64 KDA schedule's H200 stages): the file parses, stays within
its 270 s, runs only scripts and schedules that exist, and its chain — profile the variants it names, pick the
fastest as a checked schedule, verify that file, bench it against fla — runs on a CPU as dry runs: every variant
lowers, the picked file lowers, and the bench lists it as a contestant once its verdict passes."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import gpu_kda_bench as bench
import gpu_kda_profile as profile
import kda_best_variant as best
from cake.ir.parser import parse
from cake.lowering.runtime import lower
from cake.verifier.multiseed import SeededVerdicts
from cake.verifier.results import GateResult, GateStatus, Verdict

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "s9_kda64.sh"
SCHEDULE = ROOT / "experiments" / "kda" / "kda_fused_chunk64.cake"
BUDGET_S = 270  # the brief's: stage limits summing to at most 270 s


def _text() -> str:
    return SCRIPT.read_text()


def _stage_args(name: str) -> list[str]:
    """The arguments of stage `name` (the `budgeted NAME CAP MIN CMD...` line and its continuations)."""
    joined = _text().replace("\\\n", " ")
    (line,) = [ln for ln in joined.splitlines() if ln.startswith(f"budgeted {name} ")]
    return shlex.split(line)[4:]


def test_the_stage_file_parses_and_keeps_to_its_budget() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0
    text = _text()
    assert text.count("source scripts/gpu/lib.sh") == 1 and f"budget {BUDGET_S}" in text
    caps = [int(cap) for cap in re.findall(r"^budgeted \S+ (\d+) \d+ ", text, re.M)]
    assert len(caps) == 4 and sum(caps) <= BUDGET_S, caps
    for path in re.findall(r"(scripts/\S+\.(?:py|sh))", text):
        assert (ROOT / path).is_file(), path
    assert "SCHED=experiments/kda/kda_fused_chunk64.cake" in text and SCHEDULE.is_file()


def _passing_verdicts() -> str:
    one = Verdict.of("kda_forward", (GateResult("CMP-01", GateStatus.PASS, "scripted"),))
    return SeededVerdicts("kda_forward", (0, 1), (one, one)).to_json()


def test_its_chain_runs_on_a_cpu_as_dry_runs(tmp_path: Path) -> None:
    args = _stage_args("k64_profile")
    variants = args[args.index("--params") + 1:]
    assert len(variants) == 4 and all(isinstance(json.loads(v), dict) for v in variants)
    # 1. every variant lowers (a value outside a param's domain would fail here, not on the H200)
    assert profile.main(["--out", str(tmp_path / "p.json"), "--dry-run", "--schedule", str(SCHEDULE),
                         "--shapes", "h96_fixed", "--no-fla", "--params", *variants]) == 0
    # 2. a report of those variants (times invented: the pick's logic, not a measurement) -> the fastest as a file
    times = {v: 5.0 + i for i, v in enumerate(variants)}
    times[variants[1]] = 1.0
    report = {"schedule": str(SCHEDULE), "params": variants,
              "shapes": {"h96_fixed": {f"{SCHEDULE.stem} {v}": [{"ms_per_call": t}] for v, t in times.items()}}}
    (tmp_path / "k64_profile.json").write_text(json.dumps(report))
    picked = tmp_path / "k64_best.cake"
    pick = _stage_args("k64_pick")
    assert pick[0:2] == ["python3", "scripts/kda_best_variant.py"] and "--shape" in pick and "--write" in pick
    assert best.main([str(tmp_path / "k64_profile.json"), "--shape", "h96_fixed", "--write", str(picked)]) == 0
    defaults = {p.name: p.default for p in parse(picked.read_text(), str(picked)).params}
    assert all(defaults[name] == value for name, value in json.loads(variants[1]).items())
    assert "@triton.jit" in lower(parse(picked.read_text(), str(picked)), "triton", arch="sm_90a").source
    # 3. the verify stage runs every gate in bf16 under two seeds on that file
    verify = _stage_args("k64_verify")
    assert verify[:2] == ["cake", "verify"] and verify[verify.index("--seeds") + 1:][:2] == ["0", "1"]
    assert verify[verify.index("--dtypes") + 1] == "bf16" and verify[verify.index("--schedule") + 1] == "$BEST"
    # 4. the bench lowers the picked file and lists it once the verdict passes
    (tmp_path / "verify_k64.json").write_text(_passing_verdicts())
    out = tmp_path / "k64_bench.json"
    bench_args = _stage_args("k64_bench")
    shapes = bench_args[bench_args.index("--shapes") + 1:bench_args.index("--max-seconds")]
    assert shapes == ["h96_fixed", "h64_fixed"]
    assert bench.main(["--json", str(out), "--dry-run", "--schedule", str(picked), "--seed-verdict",
                       str(tmp_path / "verify_k64.json"), "--shapes", *shapes]) == 0
    data = json.loads(out.read_text())
    assert data["dry_run"] and picked.stem in data["contestants"]
    # fla's chunk_kda is timed where it loads (the H200); here it is listed with the reason it cannot
    assert "fla_chunk_kda" in data["contestants"] or "fla_chunk_kda" in data["notes"], data
