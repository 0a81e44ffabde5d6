"""`cake ops`: list the op contracts the verifier knows."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from cake.cli.common import ExitCode

if TYPE_CHECKING:
    from cake.verifier.contracts import Contract, TensorSpec


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ops", help="list the op contracts the verifier knows")
    parser.add_argument("--json", action="store_true", help="print the contracts as JSON")
    parser.set_defaults(run=run)


def _spec_text(spec: TensorSpec) -> str:
    return f"{spec.name}[{', '.join(spec.dims)}]" + ("?" if spec.optional else "")


def signature(contract: Contract) -> str:
    ins = ", ".join(_spec_text(s) for s in contract.inputs)
    outs = ", ".join(_spec_text(s) for s in contract.outputs)
    return f"{contract.name}({ins}) -> {outs}"


def contract_json(contract: Contract) -> dict[str, object]:
    from cake.verifier.tolerance import dtype_name

    return {
        "op": contract.name,
        "signature": signature(contract),
        "dtypes": [dtype_name(t) for t in contract.dtypes],
        "dims": {d.name: {"cpu": d.default_small, "gpu": d.default_gpu, "boundary": list(d.boundary_candidates)}
                 for d in contract.dims},
        "semantics": list(contract.semantics),
    }


def run(args: argparse.Namespace) -> int:
    from cake.verifier.registry import CONTRACTS
    from cake.verifier.tolerance import dtype_name

    if args.json:
        print(json.dumps([contract_json(c) for c in CONTRACTS.values()], indent=2))
        return ExitCode.OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title="op contracts", show_lines=True)
    for column in ("op", "signature", "dtypes", "default dims (cpu / gpu)", "semantics"):
        table.add_column(column, overflow="fold")
    for contract in CONTRACTS.values():
        dims = ", ".join(f"{d.name}={d.default_small}/{d.default_gpu}" for d in contract.dims)
        table.add_row(contract.name, signature(contract), " ".join(dtype_name(t) for t in contract.dtypes),
                      dims, "\n".join(contract.semantics))
    Console(width=max(Console().width, 140)).print(table)
    return ExitCode.OK
