"""KDA's seed schedules: they check, lower to Triton, pass the contract gates under Triton's CPU interpreter
in fp32 (through the workload's loader, which supplies initial_state and cu_seqlens), and the CUDA backend
refuses them with located diagnostics (what it cannot express yet: mma operands computed in registers, fp32
mma operands, cumsum)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cake.experiments.kda.workload import CORE, FORWARD, WORKLOAD
from cake.ir.parser import parse
from cake.lowering.runtime import lower

from cake.diagnostics import DiagnosticError

SEEDS = [*FORWARD.seed_paths(), *CORE.seed_paths()]


def test_workload_names_its_seeds_and_loader() -> None:
    assert WORKLOAD.primary is FORWARD and all(p.is_file() for p in SEEDS)
    assert {p.name for p in SEEDS} == {"kda_fused_chunkpar.cake", "kda_fused_chunk16.cake", "kda_chunk16.cake",
                                        "kda_chunk64.cake"}
    assert FORWARD.schedule_loader == CORE.schedule_loader == "cake.experiments.kda.adapt:load_schedule"


@pytest.mark.parametrize("path", SEEDS, ids=[p.name for p in SEEDS])
def test_seed_lowers_to_triton_and_cuda_refuses_it_with_located_diagnostics(path: Path) -> None:
    kernel = parse(path.read_text(), str(path))
    assert "@triton.jit" in lower(kernel, "triton", arch="sm_90a", filename=str(path)).source
    with pytest.raises(DiagnosticError) as refused:
        lower(kernel, "cuda", arch="sm_90a", filename=str(path))
    assert refused.value.diagnostics
    # backend-capability checks (E06xx: mma operands in registers, f32 operands for mma_sync) or codegen (C01xx)
    assert all(d.span is not None and d.code[:3] in ("E06", "C01") for d in refused.value.diagnostics)


def _cmp01_in_a_fresh_process(paths: list[str]) -> None:
    # A fresh process: TRITON_INTERPRET must be set before Triton defines any kernel. CMP-01's cases cover
    # both optional inputs present (varlen through the loader), both omitted, and adversarial values.
    script = (
        "import json, sys; from cake.verifier import run_battery, get_contract\n"
        "from cake.experiments.kda.adapt import load_schedule, schedule_op\n"
        "out = {}\n"
        "for path in sys.argv[1:]:\n"
        "    v = run_battery(get_contract(schedule_op(path)), load_schedule(path), interpreter=True,\n"
        "                    dtypes=['float32'], gates=['CMP-01'])\n"
        "    out[path] = [v.passed, [f.reason for f in v.failures]]\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", script, *paths], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for path, (passed, failures) in json.loads(proc.stdout.splitlines()[-1]).items():
        assert passed, (path, failures)


def test_seeds_pass_cmp01_under_the_interpreter_in_fp32() -> None:
    # the first seed of each op: kda_forward's chunk-parallel schedule, kda_core's chunk-16 one
    _cmp01_in_a_fresh_process([str(FORWARD.seed_paths()[0]), str(CORE.seed_paths()[0])])


@pytest.mark.slow
def test_the_naive_serial_seed_passes_cmp01_under_the_interpreter_in_fp32() -> None:
    _cmp01_in_a_fresh_process([str(FORWARD.folder / "kda_fused_chunk16.cake")])
