"""Reproduce on the CPU the H200 calibration of kmeans_update (coefficient 50,899 in fp32, 20.97 in bf16) and
show which term was wrong: `python3 scripts/repro_update_calibration.py --out repro.json [--dims gpu|small]`.

The calibration's cases are generated on the CPU and are the same bytes on every device, so at the GPU shapes
(`--dims gpu`, the default) the CPU sees exactly the inputs the H200 saw. What differs is the arithmetic of the
eager control: on a GPU `scatter_add_` adds with fp32 atomics (red.add.f32), which flush subnormal operands and
sums to zero. `torch.set_flush_denormal(True)` makes the CPU flush the same way, so the GPU's eager control is
emulated by running the old control under it. Each control's worst ratio (error / model unit) per gate is
printed under two models: the one the H200 calibrated with (reduction length N, scale max|x| over all points)
and the contract's (the cluster's size, the cluster's mean |x|).

Expected: the flushing control's EXC-02 ratio is ~1e4-1e6 in fp32 and ~20 in bf16 under either model (the H200
saw 46,272 and 19.07), every other gate stays below 1, and the contract's controls (index_put_, sequential)
stay below 1 everywhere. Prints a table; writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from cake.verifier.battery import make_context
from cake.verifier.calibrate import CALIBRATION_GATES, worst_ratio
from cake.verifier.contracts import Contract
from cake.verifier.gates import get_gate
from cake.verifier.gates.base import DimsProfile
from cake.verifier.inputs import materialize
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.tolerance import dtype_from_name
from torch import Tensor

Kernel = Callable[..., Tensor]


def scatter_add_update(x: Tensor, ids: Tensor, c_old: Tensor) -> Tensor:
    """The eager control the H200 calibrated (before this change): scatter_add_, fp32 atomics on a GPU."""
    b, n, d = x.shape
    k = c_old.shape[1]
    sums = torch.zeros(b, k, d).scatter_add_(1, ids[:, :, None].expand(b, n, d), x.float())
    counts = torch.zeros(b, k).scatter_add_(1, ids, torch.ones(b, n))
    mean = sums / counts.clamp(min=1)[:, :, None]
    return torch.where(counts[:, :, None] > 0, mean, c_old.float()).to(x.dtype)


def flushing(kernel: Kernel) -> Kernel:
    """`kernel` with subnormals flushed to zero, as the GPU's fp32 atomic adds do."""
    def run(*inputs: Tensor) -> Tensor:
        torch.set_flush_denormal(True)
        try:
            return kernel(*inputs)
        finally:
            torch.set_flush_denormal(False)
    return run


def model_before(contract: Contract) -> Contract:
    """The update's model as the H200 calibrated it: length N for every element, scale max|x| over all points."""
    def scale(x: Tensor, ids: Tensor, c_old: Tensor) -> tuple[Tensor]:
        xs = x.abs().amax(dim=1, keepdim=True).nan_to_num(0.0, 0.0, 0.0) if x.shape[1] else x[:, :1] * 0
        return (torch.maximum(xs, c_old.abs().nan_to_num(0.0, 0.0, 0.0)),)
    return replace(contract, tolerance=replace(contract.tolerance, scale=scale, lengths=None))


def worst_by_gate(contract: Contract, kernel: Kernel, dtype: torch.dtype, profile: DimsProfile,
                  gates: list[str]) -> dict[str, float]:
    ctx = make_context(contract, kernel, device="cpu", dtypes=[dtype], dims_profile=profile)
    found: dict[str, float] = {}
    for gate_id in gates:
        gate = get_gate(gate_id)
        if dtype not in gate.dtypes(ctx) or gate.applies(ctx) is not None:
            continue
        for case in gate.plan(ctx, dtype):
            inputs = materialize(contract, case, "cpu")
            ratio = worst_ratio(contract, case, inputs, (kernel(*inputs),))  # type: ignore[arg-type]
            found[gate_id] = max(found.get(gate_id, 0.0), ratio)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="write the rows here (JSON)")
    parser.add_argument("--dims", choices=("gpu", "small"), default="gpu", help="the GPU shapes (default) or the CPU's")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16", "float16"])
    parser.add_argument("--gates", nargs="+", default=list(CALIBRATION_GATES))
    args = parser.parse_args()
    if not torch.set_flush_denormal(True):
        parser.error("this CPU cannot flush subnormals (torch.set_flush_denormal needs x86 with SSE3)")
    torch.set_flush_denormal(False)
    profile = DimsProfile.GPU if args.dims == "gpu" else DimsProfile.SMALL
    contract = get_contract("kmeans_update")
    controls = get_controls("kmeans_update")
    kernels: dict[str, Kernel] = {"scatter_add, flushed (the H200's eager control)": flushing(scatter_add_update),
                                  "scatter_add, IEEE": scatter_add_update, "index_put_ (torch control)": controls.torch}
    if args.dims == "small" and controls.sequential is not None:
        kernels["sequential"] = controls.sequential  # a Python loop over the points: too slow at the GPU shapes
    models = {"before (N, max|x|)": model_before(contract), "contract (cluster size, mean|x|)": contract}
    rows = []
    print(f"{'model':34} {'control':48} {'dtype':9} " + " ".join(f"{g:>10}" for g in args.gates))
    for model_name, model in models.items():
        for control_name, kernel in kernels.items():
            for dtype_text in args.dtypes:
                t0 = time.perf_counter()
                found = worst_by_gate(model, kernel, dtype_from_name(dtype_text), profile, args.gates)
                rows.append({"model": model_name, "control": control_name, "dtype": dtype_text, "dims": args.dims,
                             "max_ratio_by_gate": found, "seconds": round(time.perf_counter() - t0, 2)})
                cells = " ".join(f"{found[g]:10.4g}" if g in found else f"{'-':>10}" for g in args.gates)
                print(f"{model_name:34} {control_name:48} {dtype_text:9} {cells}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "h200_2026_12_01": {"float32_max_ratio": 46272.0003,
                                                                     "bfloat16_max_ratio": 19.0681}}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
