"""`cake arch`: print the hardware table the checker and the cost model use."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from cake.arch import ArchSpec, MmaForm
from cake.cli.common import ExitCode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arch", help="list the targets and devices CAKE knows")
    parser.add_argument("--json", action="store_true", help="print the tables as JSON")
    parser.set_defaults(run=run)


def _form_json(form: MmaForm) -> dict[str, object]:
    return {"name": form.name, "family": form.family.value, "m": form.m, "n": form.n, "k": form.k,
            "instruction": form.instruction, "operand_dtypes": list(form.operand_dtypes),
            "accumulator_dtype": form.accumulator_dtype, "a_memory": sorted(m.value for m in form.a_memory),
            "b_memory": sorted(m.value for m in form.b_memory), "issuer": form.issuer.value,
            "feature": form.feature.value}


def _forms_summary(spec: ArchSpec) -> str:
    """`wgmma.m64nNk16 N=8..256/8` per family and shape."""
    groups: dict[tuple[str, int, int], list[int]] = {}
    for f in spec.mma_forms:
        groups.setdefault((f.family.value, f.m, f.k), []).append(f.n)
    parts = []
    for (family, m, k), ns in groups.items():
        ns = sorted(ns)
        if len(ns) == 1:
            parts.append(f"{family}.m{m}n{ns[0]}k{k}")
        else:
            parts.append(f"{family}.m{m}nNk{k} N={ns[0]}..{ns[-1]}/{ns[1] - ns[0]}")
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    from cake.arch import ARCHS, DEVICES

    if args.json:
        archs = {name: {**asdict(spec), "features": sorted(f.value for f in spec.features),
                        "mma_forms": [_form_json(f) for f in spec.mma_forms]}
                 for name, spec in ARCHS.items()}
        print(json.dumps({"archs": archs, "devices": {n: asdict(d) for n, d in DEVICES.items()}}, indent=2))
        return ExitCode.OK
    from rich.console import Console
    from rich.table import Table

    targets = Table(title="targets")
    for column in ("arch", "smem/block", "regs/SM", "TMEM cols", "features", "mma forms"):
        targets.add_column(column)
    for spec in ARCHS.values():
        targets.add_row(spec.name, f"{spec.smem_per_block_max_bytes:,} B", f"{spec.registers_per_sm:,}",
                        str(spec.tmem_columns), " ".join(sorted(f.value for f in spec.features)),
                        _forms_summary(spec))
    devices = Table(title="devices")
    for column in ("device", "arch", "SMs", "bf16 TFLOP/s", "HBM TB/s", "measured GEMM", "measured copy"):
        devices.add_column(column)
    for dev in DEVICES.values():
        devices.add_row(dev.name, dev.arch, str(dev.sm_count), f"{dev.tensor_tflops['bf16']:.0f}",
                        f"{dev.hbm_bytes_per_s / 1e12:.2f}",
                        f"{dev.measured_gemm_bf16_tflops or '-'}",
                        f"{dev.measured_copy_bytes_per_s / 1e12:.2f}" if dev.measured_copy_bytes_per_s else "-")
    console = Console()
    console.print(targets)
    console.print(devices)
    return ExitCode.OK
