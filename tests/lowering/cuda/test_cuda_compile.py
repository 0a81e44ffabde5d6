"""Every shipped schedule lowers with the CUDA backend and compiles with this machine's nvcc for its target
(sm_100a is compiled here and never run); ptxas's report parses and is within the target's budget.

One nvcc invocation per (schedule, target), about 1-2 s each; skipped (never passed) without nvcc."""

from __future__ import annotations

import pytest
from cuda_cases import CUDA_REFUSED, HAVE_NVCC, NO_NVCC, RETARGETED, SHIPPED, compiled, program, read

from cake.arch import arch as arch_spec

CASES = [(rel, None) for rel in SHIPPED if "/bad/" not in rel and rel not in CUDA_REFUSED] + list(RETARGETED)


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
@pytest.mark.parametrize(("rel", "arch"), CASES, ids=[f"{r.split('/')[-1]}@{a or 'target'}" for r, a in CASES])
def test_schedule_compiles_within_budget(rel: str, arch: str | None) -> None:
    kernel, _ = read(rel)
    target = arch or kernel.target
    module = compiled(rel, arch)
    report = module.report
    assert module.cubin[:4] == b"\x7fELF", "nvcc did not produce a cubin"
    names = {c.kname for c in program(rel, arch).launches}
    assert {k.name for k in report.kernels} == names, "every generated kernel has a ptxas entry"
    assert all(k.arch == target for k in report.kernels)
    assert report.over_budget(arch_spec(target)) == ()
    # setmaxnreg that ptxas ignores means the role budgets are not real: a schedule bug, never silently OK.
    assert not [w for w in report.warnings if "C7507" in w], report.warnings
    if "kmeans/assign_" in rel:  # the anchor schedules fit in registers: no local memory
        assert all(k.spill_bytes == 0 and k.stack_frame_bytes == 0 for k in report.kernels), report.table()
    if rel.endswith("assign_pingpong.cake"):
        assign = report.kernel("assign_pingpong_assign")
        assert assign.registers <= 168  # __launch_bounds__(384, 1); setmaxnreg reallocates from there
        assert 194 * 1024 < report.smem_dynamic_bytes["assign_pingpong_assign"] <= 227 * 1024
        gate = report.gate_mapping()
        assert gate["arch"] == "sm_90a" and gate["spill_bytes"] == 0
        assert gate["smem_bytes"] == report.smem_bytes("assign_pingpong_assign")
