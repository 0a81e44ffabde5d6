"""Calibrate the tolerance table on correct controls: `python -m cake.verifier.calibrate [--out PATH]`.

For every starter op, dtype and control (torch; sequential fp32 loops, which err as a plain tiled GPU
kernel does at long reductions; and Triton under the interpreter when TRITON_INTERPRET=1),
run the cases of the value-judging gates and record each case's worst ratio of error to the tolerance
model with coefficient 1 (tolerance.ToleranceModel.unit). The coefficient is 1.5 x the p95 of those
ratios (the paper's rule), raised where needed to MAX_MARGIN x the worst control case (a control that
fails its own calibration is a false positive by construction), and never below `min_coefficient`: below
the first-principles bound a correct implementation with another summation order (a GPU) would fail. The output is committed
data: verifier/data/tolerances.json.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from cake.verifier.battery import make_context
from cake.verifier.contracts import CONTRACTS, Contract, OutputCheck
from cake.verifier.expected import to_reference_inputs
from cake.verifier.gates import get_gate
from cake.verifier.inputs import Case, materialize
from cake.verifier.kernels_reference import SEQUENTIAL_CONTROLS, TORCH_CONTROLS, triton_controls
from cake.verifier.tolerance import TABLE_PATH, dtype_name
from torch import Tensor

CALIBRATION_GATES = ("CMP-01", "CMP-03", "ORD-01", "PRC-01", "PRC-02", "EXC-02")
P95_MARGIN = 1.5  # the paper's rule: 1.5 x the p95 error of correct controls
MAX_MARGIN = 1.1  # every calibrating control case passes with this margin
# Never tighter than the derived model: a sequential fp32 sum errs with std ~ eps/(2 sqrt 3) * sqrt(N) *
# sqrt(|t|^2/2 + r^2/3) <= 0.2 x the unit, so 6 sigma (1e8 outputs) needs 1.22; the H200's correct fp32
# matmul at K=4096 reached ~1 x the unit on a typical element (CPU controls see <= 0.4): 2 keeps a margin.
MIN_COEFFICIENT = 2.0
DEFAULT_COEFFICIENT = 2.0  # ops not calibrated yet (a new workload's contract before its first calibration)


def worst_ratio(contract: Contract, case: Case, inputs: tuple[Tensor | None, ...], outputs: tuple[Tensor, ...]) -> float:
    """Max over elements of |error| / model-unit (coefficient 1) for one case; finite elements only."""
    inputs64 = to_reference_inputs(inputs)
    refs = contract.reference(*inputs64)
    out_dtypes = contract.output_dtypes(list(inputs), case.dtype)
    units = contract.tolerance.unit(case.dim_map, inputs64, refs, case.dtype, out_dtypes)
    worst = 0.0
    for i, check in enumerate(contract.output_checks):
        got = outputs[i].detach().cpu()
        if check is OutputCheck.ARGMIN:
            assert contract.scores is not None
            scores = contract.scores(*inputs64).nan_to_num(nan=float("inf"))
            err = scores.gather(-1, got.long()[..., None])[..., 0] - scores.min(dim=-1).values
        else:
            err = (got.double() - refs[i]).abs()
        unit = units[i].expand_as(err)
        ok = torch.isfinite(err) & (unit > 0)
        if bool(ok.any()):
            worst = max(worst, float((err[ok] / unit[ok]).max()))
    return worst


def ratios(contract: Contract, kernel: Callable[..., object], dtype: torch.dtype, interpreter: bool) -> list[float]:
    ctx = make_context(contract, kernel, dtypes=[dtype], interpreter=interpreter)
    found = []
    for gate_id in CALIBRATION_GATES:
        gate = get_gate(gate_id)
        if dtype not in gate.dtypes(ctx) or gate.applies(ctx) is not None:
            continue
        for case in gate.plan(ctx, dtype):
            inputs = materialize(contract, case, "cpu")
            result = kernel(*inputs)
            outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            found.append(worst_ratio(contract, case, inputs, outputs))  # type: ignore[arg-type]
    return found


Control = tuple[str, Callable[..., object], bool]  # (source name, kernel, runs under the Triton interpreter)


def calibrate_op(contract: Contract, controls: list[Control]) -> dict[str, object]:
    """One op's table entry: per dtype, the coefficient from its correct controls' error ratios."""
    entry: dict[str, object] = {}
    for dtype in contract.dtypes:
        found: list[float] = []
        sources = []
        for source, kernel, interpreted in controls:
            if interpreted and dtype == torch.bfloat16:
                continue  # the interpreter computes bf16 as integers: not a control there
            found += ratios(contract, kernel, dtype, interpreted)
            sources.append(source)
        p95 = float(torch.tensor(found).quantile(0.95)) if found else 0.0
        worst = max(found, default=0.0)
        coefficient = max(P95_MARGIN * p95, MAX_MARGIN * worst, MIN_COEFFICIENT)
        entry[dtype_name(dtype)] = {
            "coefficient": round(coefficient, 4), "p95_ratio": round(p95, 4), "max_ratio": round(worst, 4),
            "cases": len(found), "controls": sources,
        }
    return entry


def calibrate(include_triton: bool) -> dict[str, object]:
    """The starter ops' entries; an op whose controls live in its workload (`python -m
    cake.experiments.<workload>.calibrate` writes it) keeps its committed entry."""
    controls: list[tuple[str, dict[str, Callable[..., Tensor]], bool]] = [
        ("torch", TORCH_CONTROLS, False), ("sequential", SEQUENTIAL_CONTROLS, False)]
    if include_triton:
        controls.append(("triton", triton_controls(), True))
    committed = json.loads(TABLE_PATH.read_text())["ops"] if TABLE_PATH.is_file() else {}
    ops: dict[str, object] = {}
    for name, contract in CONTRACTS.items():
        mine: list[Control] = [(source, table[name], interpreted) for source, table, interpreted in controls
                               if name in table]
        if not mine:
            if name in committed:
                ops[name] = committed[name]
            continue
        ops[name] = calibrate_op(contract, mine)
    return {
        "method": f"coefficient = max({P95_MARGIN} x p95, {MAX_MARGIN} x max, {MIN_COEFFICIENT}) of error / model unit over correct "
                  f"controls on the CPU; gates {', '.join(CALIBRATION_GATES)}; seed 0",
        "default_coefficient": DEFAULT_COEFFICIENT, "min_coefficient": MIN_COEFFICIENT, "ops": ops,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cake.verifier.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TABLE_PATH)
    parser.add_argument("--no-triton", action="store_true", help="calibrate on the torch controls only")
    args = parser.parse_args(argv)
    include_triton = not args.no_triton and (os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available())
    data = calibrate(include_triton)
    args.out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
