"""Benchmark: how long the full contract battery takes per kernel.

    python scripts/bench_verifier.py                       # CPU, Triton under the interpreter
    python scripts/bench_verifier.py --device cuda         # e.g. the H200; target <= 5 s per kernel

Kernels are the verifier test corpus's correct controls (and, with --bugs, its planted bugs). Each
battery runs in this process with every gate (`all_gates`), twice: the first run pays for Triton
compilation (one per new shape and dtype) and torch's lazy initialisation; the second is the figure
to report ("compilation excluded"). Prints a table and writes JSON. Not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "verifier"))  # the corpus manifest lives with the tests


@dataclass(frozen=True, slots=True)
class Timing:
    kernel: str
    op: str
    dtypes: tuple[str, ...]
    gates_run: int
    cases_run: int
    first_s: float  # includes compilation
    warm_s: float  # compilation excluded: the figure to report
    warm_kernel_s: float  # of warm_s, time inside the kernel's calls; the rest is the verifier's own cost
    passed: bool
    failed_gates: tuple[str, ...]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dims", choices=("device", "small", "gpu"), default="device",
                        help="default-shape profile: the device's own, or e.g. gpu on the CPU to profile the GPU battery")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bugs", action="store_true", help="also time the planted-bug kernels")
    parser.add_argument("--only", nargs="*", default=None, metavar="NAME", help="kernel names to run")
    parser.add_argument("--json", type=Path, default=None, help="output file (default bench_verifier_<device>.json)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton
    from cake.verifier.battery import run_battery
    from cake.verifier.expected import clear_cache
    from cake.verifier.gates import DimsProfile
    from cake.verifier.registry import get_contract
    from cake.verifier.worker_main import load_kernel
    from cake.verifier.worker_protocol import KernelRef
    from corpus.manifest import BUGS, CONTROLS, NO_BF16

    entries = CONTROLS + (BUGS if args.bugs else ())
    if args.only:
        entries = tuple(e for e in entries if e.name in args.only)
    timings: list[Timing] = []
    for entry in entries:
        kernel = load_kernel(KernelRef.parse(entry.ref_text))
        assert not isinstance(kernel, str), kernel
        # As in the worker: a kernel from a module that uses Triton runs under the interpreter on CPU,
        # where the gates skip bf16 (the interpreter's bf16 arithmetic is garbage).
        interpreter = args.device == "cpu" and hasattr(sys.modules.get(kernel.__module__), "triton")
        # On the GPU every kernel is judged in bf16 too; the interpreter restriction is CPU-only.
        dtypes = entry.dtypes if args.device == "cpu" else tuple(dict.fromkeys(entry.dtypes + NO_BF16 + ("bfloat16",)))
        contract = get_contract(entry.op)
        runs, inside = [], []
        for _ in range(2):
            clear_cache()  # the warm run pays for every reference again, as a fresh battery does
            timed = _Timed(kernel, args.device)
            start = time.perf_counter()
            verdict = run_battery(contract, timed, device=args.device, dtypes=dtypes, seed=args.seed,
                                  all_gates=True, interpreter=interpreter, resource_report=None,
                                  dims_profile=None if args.dims == "device" else DimsProfile(args.dims))
            _sync(args.device)
            runs.append(time.perf_counter() - start)
            inside.append(timed.seconds)
        timing = Timing(entry.name, entry.op, dtypes, len(verdict.gates), sum(g.cases_run for g in verdict.gates),
                        runs[0], runs[1], inside[1], verdict.passed, tuple(g.gate_id for g in verdict.failures))
        timings.append(timing)
        print(f"{timing.kernel:40} {timing.op:14} first {timing.first_s:7.2f} s  warm {timing.warm_s:7.2f} s "
              f"(kernel {timing.warm_kernel_s:6.2f} s)  "
              f"{'PASS' if timing.passed else 'FAIL ' + ' '.join(timing.failed_gates)}", flush=True)
    _print_table(timings, args.device)
    out = args.json or Path(f"bench_verifier_{args.device}.json")
    out.write_text(json.dumps({"device": args.device, "dims": args.dims, "device_name": _device_name(args.device), "seed": args.seed,
                               "host": platform.node(), "timings": [asdict(t) for t in timings],
                               "warm_median_s": statistics.median(t.warm_s for t in timings) if timings else None,
                               "warm_max_s": max((t.warm_s for t in timings), default=None)}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


class _Timed:
    """The kernel, with the time spent inside its calls (synchronized on cuda) summed."""

    def __init__(self, kernel: Callable[..., object], device: str):
        self.kernel, self.device, self.seconds = kernel, device, 0.0
        self.__module__ = kernel.__module__

    def __call__(self, *args: object) -> object:
        start = time.perf_counter()
        try:
            return self.kernel(*args)
        finally:
            _sync(self.device)
            self.seconds += time.perf_counter() - start


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return platform.processor() or platform.machine()


def _print_table(timings: list[Timing], device: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"full battery per kernel · {device} · all gates")
    numeric = ("gates", "cases", "first (s)", "warm (s)", "in kernel (s)")
    for column in ("kernel", "op", "dtypes", "gates", "cases", "first (s)", "warm (s)", "in kernel (s)", "verdict"):
        table.add_column(column, justify="right" if column in numeric else "left")
    for t in timings:
        table.add_row(t.kernel, t.op, " ".join(t.dtypes), str(t.gates_run), str(t.cases_run), f"{t.first_s:.2f}",
                      f"{t.warm_s:.2f}", f"{t.warm_kernel_s:.2f}", "PASS" if t.passed else "FAIL " + " ".join(t.failed_gates))
    Console(width=160).print(table)
    if timings:
        warm = [t.warm_s for t in timings]
        print(f"warm battery: median {statistics.median(warm):.2f} s, max {max(warm):.2f} s over {len(warm)} kernels")


if __name__ == "__main__":
    raise SystemExit(main())
