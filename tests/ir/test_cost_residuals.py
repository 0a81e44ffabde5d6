"""The residual tables (scripts/cost_residuals.py) and the ptxas report they read (scripts/ptxas_variants.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cost_data
import cost_residuals as cr
import fit_cost_model as fcm
import ptxas_variants as pv
import pytest
from cake.ir.cost_calibrations import CalibrationKey
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.bind_params import bind_params
from cake.lowering.cuda.program import CODEGEN_VERSION
from test_cost_fit import DIMS, PLAIN, RUN_A, RUN_B, make_run

REPORTS_BEFORE_CODEGEN_FIELD = "1"  # the CUDA codegen version of ptxas reports written without `cuda_codegen`


def test_a_term_the_model_misses_shows_as_a_residual_that_moves_with_its_param(tmp_path: Path) -> None:
    # Two runs 'measured' at planted factors, then every WARPS=8 sample made 1.5x slower than any factor can
    # say: held out by run, the residual rises with WARPS and nothing else moves as much.
    runs = [make_run(tmp_path / "a", RUN_A + [{**p, "WARPS": 8} for p in RUN_A]),
            make_run(tmp_path / "b", RUN_B + [{**p, "WARPS": 8} for p in RUN_B])]
    loaded = cost_data.load_sources(runs)
    slowed = [cost_data.Sample(s.run, s.key, s.ident, s.label,
                         s.measured_ms * (1.5 if dict(s.prediction.params)["WARPS"] == 8 else 1.0), s.prediction)
              for s in loaded.samples]
    [group] = cr.analyse(cost_data.Loaded(slowed), {})
    warps = group["features"]["WARPS"]
    assert warps["rho_with_residual"] > 0.5
    assert warps["values"]["8"]["mean_residual"] > warps["values"]["4"]["mean_residual"] + 0.2
    assert group["n"] == len(slowed) and group["shape"] == fcm.shape_tag(slowed[0])
    # the residuals are centred: the level is not a ranking error
    means = [r["mean_residual"] * r["n"] for r in warps["values"].values()]
    assert abs(sum(means)) < 1e-9


def test_ptxas_registers_join_only_the_cuda_backends_samples(tmp_path: Path) -> None:
    loaded = cost_data.load_sources([make_run(tmp_path / "a", RUN_A[:2])])
    sample = loaded.samples[0]
    report = {sample.ident: {"assign_plain_main": {"registers": 100, "spill_bytes": 0, "stack_bytes": 0}}}
    assert "ptxas_regs" not in cr.features(sample, report)  # a Triton sample: ptxas compiled the CUDA kernel
    cuda = cost_data.Sample(sample.run, CalibrationKey("cuda", "H200", "nvcc-x"), sample.ident, sample.label,
                      sample.measured_ms, sample.prediction)
    feats = cr.features(cuda, report)
    assert feats["ptxas_regs"] == 100 and feats["model_regs_error"] == feats["model_regs"] - 100


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (ptxas's report)")
def test_ptxas_report_of_one_variant_matches_the_committed_report() -> None:
    params = {"BN": 128, "BK": 32, "STAGES": 2, "WARPS": 4}
    text = print_kernel(bind_params(parse(PLAIN), params))
    launches = pv.resources(text, "test", DIMS, DType.BF16)
    main = launches["assign_plain_main"]
    assert 0 < main["registers"] <= 255 and main["spill_bytes"] >= 0
    committed = json.loads((Path(__file__).resolve().parents[2] / "results" / "cpu-2026-12-02" /
                            "ptxas_cuda_variants_s5.json").read_text())
    # Same compiler and same codegen: the same count as the timed kernel's. A report that does not record its
    # codegen version predates the field: the s5 one was lowered by codegen 1 (commit b918fe8), and codegen 4's
    # row-per-lane ||c||^2 changes this kernel's count (codegen 2: 128 registers, 4: 125).
    codegen = committed.get("cuda_codegen", REPORTS_BEFORE_CODEGEN_FIELD)
    if committed["nvcc"] == pv.nvcc_version() and codegen == CODEGEN_VERSION:
        counts = {r["assign_plain_main"]["registers"] for r in committed["candidates"].values()
                  if "assign_plain_main" in r}
        assert main["registers"] in counts
