"""Calibrate tolerance tables on correct controls: `python -m cake.verifier.calibrate [--op OP ...] [--out PATH]`.

For every registered op (or those named), dtype and control (torch; sequential fp32 loops, which err as a plain tiled GPU
kernel does at long reductions; and Triton under the interpreter when TRITON_INTERPRET=1),
run the cases of the value-judging gates and record each case's worst ratio of error to the tolerance
model with coefficient 1 (tolerance.ToleranceModel.unit). The coefficient is 1.5 x the p95 of those
ratios (the paper's rule), raised where needed to MAX_MARGIN x the worst control case (a control that
fails its own calibration is a false positive by construction), and never below `min_coefficient`: below
the first-principles bound a correct implementation with another summation order (a GPU) would fail. A coefficient
above MAX_COEFFICIENT is refused, not written: a correct control that far outside the model either breaks its
contract (the H200's fp32 atomics flush subnormal sums to 0, which EXC-02 rejects) or the op's model is wrong — widening
the tolerance by that factor would hide real bugs. The refusal names the control, gate, case and replay token of
the worst ratio (the command exits 1; the other ops are still written); each entry records the same for its
own worst case (`worst`). Each op's
entry is written to its own table (`ToleranceModel.table`, a JSON file its workload commits beside its
contracts), keeping the other ops' entries there; `--out` writes every calibrated op to one file instead.

`--device cuda` runs the torch and compiled Triton controls on the GPU at the GPU shapes (the sequential
controls emulate a GPU loop on the CPU and stay there) and writes each op's entry to the GPU table beside its
CPU table (`tolerance.gpu_table_path`: `tolerances_cuda.json`). The verifier judges with the larger
coefficient of the two on every device (tolerance.load_table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from cake.verifier.battery import make_context
from cake.verifier.contracts import Contract, OutputCheck
from cake.verifier.expected import to_reference_inputs
from cake.verifier.gates import get_gate
from cake.verifier.inputs import Case, materialize
from cake.verifier.registry import CONTRACTS, get_contract, get_controls
from cake.verifier.sampling import case_rows, take_rows
from cake.verifier.tokens import ReplayToken
from cake.verifier.tolerance import DEFAULT_COEFFICIENT, dtype_name, gpu_table_path, load_table
from cake.verifier.tolerance_band import MAX_COEFFICIENT, MIN_COEFFICIENT
from torch import Tensor

CALIBRATION_GATES = ("CMP-01", "CMP-03", "ORD-01", "PRC-01", "PRC-02", "EXC-02")
P95_MARGIN = 1.5  # the paper's rule: 1.5 x the p95 error of correct controls
MAX_MARGIN = 1.1  # every calibrating control case passes with this margin
# MIN_COEFFICIENT (the first-principles floor) and MAX_COEFFICIENT (the sane top) live in tolerance_band.py.


class CalibrationError(Exception):
    """A correct control erred beyond MAX_COEFFICIENT model units: the control or the op's model is wrong."""


@dataclass(frozen=True, slots=True)
class CaseRatio:
    """One calibrating case's worst error in model units, and where it came from."""

    ratio: float
    control: str
    case: Case
    device: str

    def token(self, op: str) -> str:
        device = "cuda" if self.device.startswith("cuda") else self.device  # tokens name the device kind
        return ReplayToken(op, self.case.gate_id, self.case.seed, self.case.case_index, dtype_name(self.case.dtype),
                           device).encode()

    def describe(self, op: str) -> dict[str, object]:
        return {"ratio": round(self.ratio, 4), "control": self.control, "gate": self.case.gate_id,
                "case": self.case.describe(), "token": self.token(op)}


def worst_ratio(contract: Contract, case: Case, inputs: tuple[Tensor | None, ...], outputs: tuple[Tensor, ...]) -> float:
    """Max over elements of |error| / model-unit (coefficient 1) for one case; finite elements only. The
    reference runs where the inputs are (fp64 on the GPU for GPU cases); a sampled case is judged on its rows."""
    rows = case_rows(contract, case)
    if rows is not None:
        assert contract.row_dim is not None
        inputs = tuple(take_rows(contract.inputs, inputs, contract.row_dim, rows))
        outputs = tuple(t for t in take_rows(contract.outputs, outputs, contract.row_dim, rows) if t is not None)
    inputs64 = to_reference_inputs(inputs)
    refs = contract.reference(*inputs64)
    out_dtypes = contract.output_dtypes(list(inputs), case.dtype)
    units = contract.tolerance.unit(case.dim_map, inputs64, refs, case.dtype, out_dtypes)
    worst = 0.0
    for i, check in enumerate(contract.output_checks):
        got = outputs[i].detach().to(refs[i].device)
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


def ratios(contract: Contract, kernel: Callable[..., object], dtype: torch.dtype, interpreter: bool,
           device: str = "cpu", control: str = "torch", seed: int = 0) -> list[CaseRatio]:
    ctx = make_context(contract, kernel, device=device, dtypes=[dtype], interpreter=interpreter, seed=seed)
    found = []
    for gate_id in CALIBRATION_GATES:
        gate = get_gate(gate_id)
        if dtype not in gate.dtypes(ctx) or gate.applies(ctx) is not None:
            continue
        for case in gate.plan(ctx, dtype):
            inputs = materialize(contract, case, device)
            result = kernel(*inputs)
            outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            found.append(CaseRatio(worst_ratio(contract, case, inputs, outputs), control, case,  # type: ignore[arg-type]
                                   device))
    return found


def calibrate_op(contract: Contract, include_triton: bool, device: str = "cpu",
                 seeds: Sequence[int] = (0,)) -> dict[str, object]:
    """The table entry of one op: per dtype, the coefficient and the ratios it came from, over the cases of
    every seed in `seeds` (one seed's draw can miss the inputs a correct control errs most on)."""
    gpu = device.startswith("cuda")
    controls = get_controls(contract.name)
    # On a GPU only the torch control: the sequential one emulates a GPU loop with CPU tensors inside.
    kernels: list[tuple[str, Callable[..., object], bool]] = [(k, f, False) for k, f in controls.named().items()
                                                                if not gpu or k == "torch"]
    triton = controls.triton_kernel() if include_triton else None
    if triton is not None:
        kernels.append(("triton", triton, not gpu))
    entry: dict[str, object] = {}
    for dtype in contract.dtypes:
        found: list[CaseRatio] = []
        sources = []
        for source, kernel, interpreted in kernels:
            if interpreted and dtype == torch.bfloat16:
                continue  # the interpreter computes bf16 as integers: not a control there
            for seed in seeds:
                started = time.perf_counter()
                cases = ratios(contract, kernel, dtype, interpreted, device, source, seed)
                found += cases
                # Progress on stderr: a GPU calibration at long sequences runs for minutes, and a run cut by a time
                # limit should say how far it got.
                print(f"{contract.name} {dtype_name(dtype)} {source} seed {seed}: {len(cases)} cases in "
                      f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
            sources.append(source)
        entry[dtype_name(dtype)] = dtype_entry(contract.name, found, sources)
    return entry


def dtype_entry(op: str, found: list[CaseRatio], sources: list[str]) -> dict[str, object]:
    """One (op, dtype) entry from its cases' ratios; CalibrationError when the coefficient leaves the band."""
    values = [r.ratio for r in found]
    p95 = float(torch.tensor(values).quantile(0.95)) if values else 0.0
    worst = max(found, key=lambda r: r.ratio, default=None)
    max_ratio = worst.ratio if worst is not None else 0.0
    coefficient = max(P95_MARGIN * p95, MAX_MARGIN * max_ratio, MIN_COEFFICIENT)
    if coefficient > MAX_COEFFICIENT:
        assert worst is not None
        where = worst.describe(op)
        raise CalibrationError(
            f"{op} {dtype_name(worst.case.dtype)}: a correct control needs coefficient {coefficient:.4g} > {MAX_COEFFICIENT:g} "
            f"(p95 ratio {p95:.4g}, max {max_ratio:.4g}); worst: the {where['control']} control on {where['gate']} "
            f"{where['case']}, `{where['token']}`. Either that control breaks the contract on this case (replay the "
            "token against it: e.g. fp32 atomics flush subnormal sums, which EXC-02 rejects) and must be fixed, or "
            "the op's tolerance model (its ToleranceModel scale/reduction/lengths) misjudges it; no table was "
            "written for this op")
    return {"coefficient": round(coefficient, 4), "p95_ratio": round(p95, 4), "max_ratio": round(max_ratio, 4),
            "cases": len(found), "controls": sources, "worst": worst.describe(op) if worst is not None else None}


def table_json(ops: dict[str, object], device: str = "cpu", seeds: Sequence[int] = (0,)) -> dict[str, object]:
    return {
        "method": f"coefficient = max({P95_MARGIN} x p95, {MAX_MARGIN} x max, {MIN_COEFFICIENT}) of error / model unit over correct "
                  f"controls on {_where(device)}; gates {', '.join(CALIBRATION_GATES)}; {_seeds_text(seeds)}",
        "default_coefficient": DEFAULT_COEFFICIENT, "min_coefficient": MIN_COEFFICIENT,
        "max_coefficient": MAX_COEFFICIENT, "ops": ops,
    }


def _seeds_text(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(str(s) for s in seeds)}"


def _where(device: str) -> str:
    if device.startswith("cuda"):
        return f"the GPU ({torch.cuda.get_device_name(torch.device(device))}) at the GPU shapes"
    return "the CPU"


def write_tables(entries: dict[str, dict[str, object]], out: Path | None, device: str = "cpu",
                 seeds: Sequence[int] = (0,)) -> list[Path]:
    """Each op's entry into its contract's table (merged with the ops already there), or all into `out`;
    with a GPU `device`, into the GPU table beside the contract's table."""
    by_path: dict[Path, dict[str, object]] = {}
    for op, entry in entries.items():
        path = out or get_contract(op).tolerance.table
        if path is not None and out is None and device.startswith("cuda"):
            path = gpu_table_path(path)
        if path is None:
            raise SystemExit(f"op `{op}` has no tolerance table: set ToleranceModel(table=PATH) in its contract, "
                             "or pass --out")
        if path not in by_path:
            by_path[path] = json.loads(path.read_text())["ops"] if path.is_file() and out is None else {}
        by_path[path][op] = entry
    for path, ops in by_path.items():
        path.write_text(json.dumps(table_json(dict(sorted(ops.items())), device, seeds), indent=2, sort_keys=True) + "\n")
    load_table.cache_clear()
    return sorted(by_path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cake.verifier.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--op", nargs="*", default=None, help="ops to calibrate (default: every registered op)")
    parser.add_argument("--out", type=Path, default=None, help="write every calibrated op to this one file")
    parser.add_argument("--no-triton", action="store_true", help="calibrate on the eager controls only")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the controls run (cuda: GPU shapes, compiled Triton, the GPU table)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="calibrate over the gates' cases under each of these seeds (default: 0)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    if args.device == "cuda":
        include_triton = not args.no_triton
    else:
        include_triton = not args.no_triton and os.environ.get("TRITON_INTERPRET") == "1"
    names = args.op or list(CONTRACTS)
    entries: dict[str, dict[str, object]] = {}
    refused: list[str] = []
    for name in names:
        try:
            entries[name] = calibrate_op(get_contract(name), include_triton, args.device, args.seeds)
        except CalibrationError as exc:  # the other ops still calibrate; this one keeps its table as it was
            refused.append(str(exc))
    for path in write_tables(entries, args.out, args.device, args.seeds) if entries else []:
        print(f"wrote {path}")
    for message in refused:
        print(f"calibration refused: {message}", file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
