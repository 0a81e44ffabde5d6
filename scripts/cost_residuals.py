"""CPU: where the cost model ranks wrong — held-out-by-run residuals against each param and occupancy figure.

    python3 scripts/cost_residuals.py --out results/cpu-2026-12-02/cost_residuals_s6.json \
        [--registers results/cpu-2026-12-02/ptxas_cuda_variants_s5.json] [SOURCES ...]

For every key (backend, device, toolchain) and timing shape of the committed timing data (the sources of
`scripts/fit_cost_model.py`), each run is predicted by factors fitted on the other runs (the fitter's
leave-one-run-out), and each candidate's residual is log(measured / predicted). A term that is wrong shows as a
residual that moves with a param: the table gives, per feature value, the count, the mean residual and the
median measured time, and per feature Spearman's rho between the feature and the residual (|rho| large = the
model misses that feature's effect; the sign says which way). Residuals are centred per shape, so a wrong
level does not show, only a wrong ordering.

Features: the schedule's params (BN, BK, STAGES, WARPS, ...), the schedule, and the slowest launch's
occupancy as the model sees it (CTAs per SM, what limits them, registers per thread, resident warps,
tiles on the busiest SM). With `--registers` (the report of `scripts/ptxas_variants.py`), also ptxas's
registers and spill bytes, and the model's register error against them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import cost_data
import fit_cost_model as fcm
from cake.ir.cost_calibration import spearman
from cake.ir.cost_calibrations import CalibrationKey

MIN_GROUP = 3  # feature values seen fewer times are pooled into "other" in the table


def features(sample: cost_data.Sample, registers: Mapping[str, Any]) -> dict[str, float | str]:
    """What a residual may depend on: params, schedule, and the model's occupancy of the slowest launch."""
    pred = sample.prediction
    lp = max(pred.launches, key=lambda launch: launch.time_s)
    occ = lp.occupancy
    out: dict[str, float | str] = {name: value for name, value in pred.params}
    out.update({"schedule": pred.kernel, "ctas_per_sm": occ.ctas_per_sm, "limited_by": occ.limited_by,
                "model_regs": occ.regs_per_thread, "resident_warps": occ.resident_warps,
                "tiles_on_busiest_sm": occ.tiles_on_busiest_sm, "bound": lp.bound.name})
    report = registers.get(sample.ident) if sample.key.backend == "cuda" else None  # ptxas: the CUDA backend's kernels
    if isinstance(report, dict):
        launch = next((r for name, r in report.items() if name.endswith(f"_{lp.launch}") and isinstance(r, dict)),
                      None)
        if launch is not None:
            out["ptxas_regs"] = launch["registers"]
            out["ptxas_spill_bytes"] = launch["spill_bytes"]
            out["model_regs_error"] = occ.regs_per_thread - launch["registers"]
    return out


def residual_table(samples: Sequence[cost_data.Sample], predicted_s: Sequence[float],
                   registers: Mapping[str, Any]) -> dict[str, Any]:
    """Per feature: rho(feature, residual) over the numeric ones, and the mean residual per value."""
    resid = [math.log(s.measured_ms * 1e-3 / p) for s, p in zip(samples, predicted_s, strict=True)]
    centre = statistics.fmean(resid)
    resid = [r - centre for r in resid]
    feats = [features(s, registers) for s in samples]
    names = sorted({k for f in feats for k in f})
    table: dict[str, Any] = {}
    for name in names:
        values = [(f[name], r, s.measured_ms) for f, r, s in zip(feats, resid, samples, strict=True) if name in f]
        numeric = [(v, r) for v, r, _ in values if isinstance(v, (int, float))]
        rho = spearman([v for v, _ in numeric], [r for _, r in numeric]) \
            if len(numeric) >= 3 and len({v for v, _ in numeric}) > 1 else None
        groups: dict[str, list[tuple[float, float]]] = {}
        for v, r, ms in values:
            groups.setdefault(str(v), []).append((r, ms))
        small = [k for k, g in groups.items() if len(g) < MIN_GROUP]
        if len(small) > 1:
            groups.setdefault("other", []).extend(x for k in small for x in groups.pop(k))
        rows = {k: {"n": len(g), "mean_residual": statistics.fmean(r for r, _ in g),
                    "median_measured_ms": statistics.median(ms for _, ms in g)}
                for k, g in sorted(groups.items(), key=lambda kv: _order(kv[0]))}
        table[name] = {"rho_with_residual": rho, "values": rows}
    return table


def _order(value: str) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)


def analyse(loaded: cost_data.Loaded, registers: Mapping[str, Any]) -> list[dict[str, Any]]:
    by_key: dict[CalibrationKey, list[cost_data.Sample]] = {}
    for s in loaded.samples:
        by_key.setdefault(s.key, []).append(s)
    out = []
    for key in sorted(by_key):
        held = fcm.hold_out_by_run(by_key[key])
        if held is None:
            continue
        shapes: dict[str, list[int]] = {}
        for i, s in enumerate(held.samples):
            shapes.setdefault(fcm.shape_tag(s), []).append(i)
        for tag, idx in sorted(shapes.items()):
            samples = [held.samples[i] for i in idx]
            predicted = [held.predicted_s[i] for i in idx]
            out.append({"key": str(key), "shape": tag, "n": len(samples),
                        "held_out": fcm.figures(predicted, [s.measured_ms for s in samples]),
                        "features": residual_table(samples, predicted, registers)})
    return out


def print_group(group: Mapping[str, Any]) -> None:
    fig = group["held_out"]
    print(f"\n== {group['key']} at {group['shape']}: {group['n']} held out by run, rho {fcm._fmt(fig['spearman'])}, "
          f"top-5 {fcm._fmt(fig['top5_recall'], '.2f')}")
    print("   residual = log(measured / predicted), centred; + means the model predicts it too fast")
    ranked = sorted(group["features"].items(), key=lambda kv: -abs(kv[1]["rho_with_residual"] or 0.0))
    for name, feat in ranked:
        rho = feat["rho_with_residual"]
        cells = "  ".join(f"{v}:{r['mean_residual']:+.2f}(n{r['n']},{r['median_measured_ms']:.3f}ms)"
                          for v, r in list(feat["values"].items())[:9])
        print(f"   {name[:18]:18} rho {fcm._fmt(rho, '+.2f'):>6}  {cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", type=Path, help="as fit_cost_model.py (default: the committed data)")
    parser.add_argument("--registers", type=Path, help="scripts/ptxas_variants.py's report")
    parser.add_argument("--out", type=Path, help="write the tables as JSON here")
    args = parser.parse_args(argv)
    sources = args.sources or cost_data.default_sources()
    try:
        loaded = cost_data.load_sources(sources)
    except cost_data.SourceError as error:
        print(f"cost_residuals: {error}", file=sys.stderr)
        return 2
    registers = json.loads(args.registers.read_text())["candidates"] if args.registers else {}
    groups = analyse(loaded, registers)
    for group in groups:
        print_group(group)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"sources": [str(s) for s in sources], "groups": groups}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
