"""RES gates and the roofline floor the benchmark uses to reject implausible timings."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from cake.verifier.contracts import Contract
from cake.verifier.gates.base import DtypePolicy, Gate, GateContext, cases, register, run_once
from cake.verifier.inputs import Case, Layout, ValueFamily
from cake.verifier.results import GateResult, GateStatus
from cake.verifier.runner import CaseOutcome

from cake.arch import DeviceSpec, UnknownArchError, arch

# Timers jitter; a time below this fraction of the floor cannot be noise. The floor uses datasheet peaks,
# never our lower measured ceilings, so only physically impossible times are flagged.
ROOFLINE_SLACK = 0.9


def _res01_plan(ctx: GateContext, dtype: torch.dtype) -> list[Case]:
    return cases(ctx, "RES-01", dtype, [(ctx.default_dims(), ValueFamily.RANDN, Layout.CONTIGUOUS)])


def _res01_check(ctx: GateContext, case: Case) -> CaseOutcome:
    inputs, outputs = run_once(ctx, case)
    device = next(t.device for t in inputs if t is not None)
    for spec, out in zip(ctx.contract.outputs, outputs, strict=True):
        if out.device != device:
            return CaseOutcome(GateStatus.FAIL, f"output `{spec.name}` is on {out.device}, inputs are on {device}")
    return CaseOutcome(GateStatus.PASS, f"outputs on {device}")


RES_01 = register(Gate("RES-01", "outputs on the inputs' device", _res01_plan, _res01_check, DtypePolicy.PRIMARY))


def _res02_static(ctx: GateContext) -> GateResult:
    report = ctx.resource_report
    if report is None:
        return GateResult("RES-02", GateStatus.SKIP, "no resource report given (the lowering provides one)")
    try:
        spec = arch(report.arch)
    except UnknownArchError as exc:
        return GateResult("RES-02", GateStatus.FAIL, str(exc))
    over = []
    if report.registers_per_thread is not None and report.registers_per_thread > spec.registers_per_thread_max:
        over.append(f"{report.registers_per_thread} registers/thread > {spec.registers_per_thread_max}")
    smem_limit = spec.smem_per_block_max_bytes
    if report.smem_bytes is not None and report.smem_bytes > smem_limit:
        over.append(f"{report.smem_bytes:,} bytes shared memory > {smem_limit:,}")
    if report.tmem_columns is not None and report.tmem_columns > spec.tmem_columns:
        over.append(f"{report.tmem_columns} TMEM columns > {spec.tmem_columns}")
    if over:
        return GateResult("RES-02", GateStatus.FAIL, f"over the {spec.name} budget: " + "; ".join(over))
    # Spills are legal but slow: reported, not failed.
    spills = f"; {report.spill_bytes} bytes spilled" if report.spill_bytes else ""
    return GateResult("RES-02", GateStatus.PASS, f"within the {spec.name} budget{spills}")


RES_02 = register(Gate("RES-02", "registers <= 255, shared memory and TMEM within the hardware budget",
                       lambda ctx, dtype: [], lambda ctx, case: CaseOutcome(GateStatus.PASS, ""), static=_res02_static))


def roofline_floor_s(contract: Contract, shape: Mapping[str, int], dtype: torch.dtype, device_spec: DeviceSpec) -> float:
    """The least time the op can take on `device_spec`: max(compute at peak, HBM traffic at peak bandwidth)."""
    name = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "tf32"}.get(dtype, "bf16")
    peak_tflops = device_spec.tensor_tflops.get(name, device_spec.cuda_core_fp32_tflops) if contract.tensor_core \
        else device_spec.cuda_core_fp32_tflops
    if contract.tensor_core:
        peak_tflops = max(peak_tflops, device_spec.cuda_core_fp32_tflops)
    bandwidth = max(device_spec.hbm_bytes_per_s, device_spec.measured_copy_bytes_per_s or 0.0)
    return max(contract.flops(shape) / (peak_tflops * 1e12), contract.bytes(shape, dtype) / bandwidth)


def implausible_speed(contract: Contract, shape: Mapping[str, int], dtype: torch.dtype, measured_s: float,
                      device_spec: DeviceSpec) -> bool:
    """True when `measured_s` beats the roofline floor: a skipped computation or a timing bug, not a record."""
    return measured_s < ROOFLINE_SLACK * roofline_floor_s(contract, shape, dtype, device_spec)
