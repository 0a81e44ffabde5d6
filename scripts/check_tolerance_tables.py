"""Check GPU tolerance tables against the CPU ones and the sane band:
`python3 scripts/check_tolerance_tables.py --out check.json [--pair CPU_TABLE GPU_TABLE ...]`.

Without --pair, every registered workload table (`ToleranceModel.table`) is paired with its GPU twin beside it
(`tolerances_cuda.json`, what `python -m cake.verifier.calibrate --device cuda` writes). For each (op, dtype) of
each pair it prints the CPU and GPU coefficients and worst control ratios, and flags what leaves the band
(cake.verifier.tolerance_band): a coefficient outside [2, 100], a worst ratio above 1 (the model underestimates a
correct GPU control) or, for value outputs, below 0.1 (the model is over 10x loose), an (op, dtype) the GPU table
lacks (FLAG: do not commit the table as it is); a ratio below 0.1 is a note only (the floor still judges; a GPU
table may just have exact controls). Writes every row as JSON; exits 1 when anything is flagged or a GPU table is
missing, 0 otherwise (then the GPU tables can be committed beside the CPU ones).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cake.verifier.contracts import OutputCheck
from cake.verifier.registry import CONTRACTS
from cake.verifier.tolerance import gpu_table_path
from cake.verifier.tolerance_band import (
    MAX_COEFFICIENT,
    MIN_COEFFICIENT,
    SANE_MAX_RATIO,
    Comparison,
    compare_tables,
)


def default_pairs(ops: list[str] | None) -> list[tuple[Path, Path]]:
    tables = {c.tolerance.table for name, c in CONTRACTS.items() if c.tolerance.table is not None
              and (ops is None or name in ops)}
    return [(t, gpu_table_path(t)) for t in sorted(p for p in tables if p is not None)]


def argmin_ops() -> frozenset[str]:
    return frozenset(name for name, c in CONTRACTS.items() if OutputCheck.ARGMIN in c.output_checks)


def _cell(value: object) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, (int, float)) else str(value)


def print_rows(cpu: Path, gpu: Path, rows: list[Comparison]) -> None:
    print(f"\n{gpu}  (against {cpu})")
    print(f"{'op':16} {'dtype':9} {'cpu coef':>9} {'gpu coef':>9} {'cpu max':>9} {'gpu max':>9}  gpu controls / findings")
    for c in rows:
        r = c.row
        print(f"{c.op:16} {c.dtype:9} {_cell(r['cpu_coefficient']):>9} {_cell(r['gpu_coefficient']):>9} "
              f"{_cell(r['cpu_max_ratio']):>9} {_cell(r['gpu_max_ratio']):>9}  {','.join(r['gpu_controls'] or [])}")
        for finding in c.findings:
            print(f"{'':16} {'FLAG' if finding.blocking else 'note'} {finding}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="write the rows and findings here (JSON)")
    parser.add_argument("--pair", nargs=2, action="append", type=Path, metavar=("CPU_TABLE", "GPU_TABLE"),
                        help="a CPU table and the GPU table to check against it (repeatable; default: every "
                             "registered table and its tolerances_cuda.json twin)")
    parser.add_argument("--op", nargs="*", default=None, help="with the default pairs: only these ops' tables")
    args = parser.parse_args()
    pairs = [(a, b) for a, b in args.pair] if args.pair else default_pairs(args.op)
    argmin = argmin_ops()
    report: dict[str, object] = {"band": {"coefficient": [MIN_COEFFICIENT, MAX_COEFFICIENT],
                                          "max_ratio": list(SANE_MAX_RATIO)}, "tables": []}
    flagged = 0
    for cpu, gpu in pairs:
        if not gpu.is_file():
            print(f"\nMISSING {gpu} (the GPU calibration did not write it)")
            report["tables"].append({"cpu": str(cpu), "gpu": str(gpu), "missing": True})  # type: ignore[attr-defined]
            flagged += 1
            continue
        gpu_ops = json.loads(gpu.read_text())["ops"]
        cpu_ops = json.loads(cpu.read_text())["ops"]
        rows = compare_tables(gpu_ops, cpu_ops, argmin)
        print_rows(cpu, gpu, rows)
        flagged += sum(f.blocking for c in rows for f in c.findings)
        report["tables"].append({"cpu": str(cpu), "gpu": str(gpu), "rows": [c.row for c in rows]})  # type: ignore[attr-defined]
    report["flagged"] = flagged
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{flagged} flag(s); wrote {args.out}")
    return 1 if flagged else 0


if __name__ == "__main__":
    raise SystemExit(main())
