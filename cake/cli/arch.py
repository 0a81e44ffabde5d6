"""`cake arch`: print the hardware table the checker and the cost model use."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from cake.cli.common import ExitCode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arch", help="list the targets and devices CAKE knows")
    parser.add_argument("--json", action="store_true", help="print the tables as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cake.arch import ARCHS, DEVICES

    if args.json:
        archs = {name: {**asdict(spec), "features": sorted(f.value for f in spec.features)}
                 for name, spec in ARCHS.items()}
        print(json.dumps({"archs": archs, "devices": {n: asdict(d) for n, d in DEVICES.items()}}, indent=2))
        return ExitCode.OK
    from rich.console import Console
    from rich.table import Table

    targets = Table(title="targets")
    for column in ("arch", "smem/block", "regs/SM", "TMEM cols", "features"):
        targets.add_column(column)
    for spec in ARCHS.values():
        targets.add_row(spec.name, f"{spec.smem_per_block_max_bytes:,} B", f"{spec.registers_per_sm:,}",
                        str(spec.tmem_columns), " ".join(sorted(f.value for f in spec.features)))
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
