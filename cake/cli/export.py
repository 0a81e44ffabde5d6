"""`cake export` and `cake certify`: best verified kernels -> a serving package with a certificate.

    cake export RUN_DIR --op kmeans_assign -o out/            # the run's best passed candidates
    cake export assign_pingpong.cake update_onehot.cake --backend cuda --arch sm_90a -o out/
    cake certify out/ --device cuda                           # the full battery here; a row per op

Exit 0 when written (certify: every op passed), 1 when certify found a failing gate, 2 on bad usage.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cake.cli.common import ExitCode, UsageError
from cake.cli.verify import normalize_dtypes

DEFAULT_TOP = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="write a pip-installable package of verified kernels")
    parser.add_argument("sources", nargs="+", type=Path, metavar="RUN_DIR | FILE.cake | TABLE.json",
                        help="a run directory, or schedule files (each exports the op it implements), or an op's "
                             "per-shape choice tables (each configuration exported, and tried first at the "
                             "declared shapes the table sends to it)")
    parser.add_argument("--op", action="append", default=[], help="the op to export from a run (repeatable)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="the project folder to write (new or empty)")
    parser.add_argument("--name", help="package and torch.ops namespace (default cake_<workload>)")
    parser.add_argument("--backend", choices=("triton", "cuda"),
                        help="lower with this backend (default: the run's, else triton)")
    parser.add_argument("--arch", action="append", default=[], help="CUDA: compile cubins for this target "
                        "(repeatable; default the schedule's target)")
    parser.add_argument("--static", action="append", default=[], metavar="DIM=V,V",
                        help="CUDA: compile a static dim for these values (default: the declared shapes')")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP, help=f"candidates per op from a run ({DEFAULT_TOP})")
    parser.set_defaults(run=run_export)

    certify = subparsers.add_parser("certify", help="re-run the contract gates on an exported package here")
    certify.add_argument("package", type=Path, help="the exported project or package folder")
    certify.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    certify.add_argument("--dtypes", nargs="+", metavar="DTYPE", help="fp32 fp16 bf16 (default: the contract's)")
    certify.add_argument("--seed", type=int, default=0)
    certify.add_argument("--gates", nargs="+", metavar="GATE", help="a subset of gates (default: all)")
    certify.set_defaults(run=run_certify)


def _statics(items: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in items:
        dim, eq, values = item.partition("=")
        try:
            out[dim.strip()] = [int(v) for v in values.split(",")]
        except ValueError:
            raise UsageError(f"--static {item!r}: expected DIM=V[,V...]") from None
        if not eq or not dim.strip():
            raise UsageError(f"--static {item!r}: expected DIM=V[,V...]")
    return out


def run_export(args: argparse.Namespace) -> int:
    from cake.experiments.workload import UnknownWorkloadError, workload_for_op
    from cake.export import ExportError, export_package, from_choice_table, from_files, from_run
    from cake.lowering.runtime import ScheduleError

    try:
        if len(args.sources) == 1 and args.sources[0].is_dir():
            candidates, run_backend = from_run(args.sources[0], args.op, args.top)
        else:
            # Choice tables (JSON) route declared shapes to their configurations; .cake files are taken as they are.
            tables = [p for p in args.sources if p.suffix == ".json"]
            files = [p for p in args.sources if p.suffix != ".json"]
            candidates = [c for t in tables for c in from_choice_table(t)] + (from_files(files) if files else [])
            run_backend = "triton"
            if args.op:
                candidates = [c for c in candidates if c.op in args.op]
        name = args.name
        if name is None:
            try:
                name = "cake_" + workload_for_op(candidates[0].op).name if candidates else "cake_kernels"
            except UnknownWorkloadError:
                name = f"cake_{candidates[0].op}"
        result = export_package(candidates, args.out, name=name, backend=args.backend or run_backend,
                                archs=tuple(args.arch), static_overrides=_statics(args.static))
    except (ExportError, ScheduleError, ValueError) as error:
        raise UsageError(str(error)) from None
    print(f"wrote {result.root} (package {result.package}): ops {', '.join(result.ops)}; kernels "
          + ", ".join(f"{vid}={schedule}" for vid, schedule in result.variants.items()))
    for skipped in result.skipped:
        print(f"  not compiled: {skipped}")
    print(f"install: pip install {result.root}   certify: cake certify {result.root} --device cuda")
    return ExitCode.OK


def run_certify(args: argparse.Namespace) -> int:
    from cake.export import ExportError
    from cake.export.certify import certify

    try:
        rows = certify(args.package, device=args.device, seed=args.seed, gates=args.gates,
                       dtypes=normalize_dtypes(args.dtypes) if args.dtypes else None)
    except ExportError as error:
        raise UsageError(str(error)) from None
    for row in rows:
        verdict = row["verdict"]
        failed = [g["gate"] for g in verdict["gates"] if g["status"] not in ("PASS", "SKIP")]
        status = "PASSED" if row["passed"] else "FAILED " + ", ".join(failed)
        print(f"{row['entry']} on {row['device']}: {status} ({len(verdict['gates'])} gates, seed {row['seed']})")
    return ExitCode.OK if all(r["passed"] for r in rows) else ExitCode.FINDINGS
