"""What ptxas needs to issue a wgmma, against what the checker's E0308 says: a session 28 H200 evolve child
(7 consumer warpgroups, wgmma.m64n128k16) and session 27's held best (its wgmma's A operand in registers) at a few
thread counts and tile widths, each compiled by nvcc for sm_90a with E0308 lifted (so ptxas, not the checker,
decides), beside E0308's verdict on the same schedule.

    python3 scripts/probe_wgmma_registers.py [--json OUT.json]

No GPU: it compiles only (nvcc on the PATH). Each row: the launch's threads and the register cap ptxas compiles
under (`__launch_bounds__(threads, 1)`), the accumulator fragment of one wgmma, whether ptxas compiled it (and the
register target it asked for when it refused), and whether E0308 refuses it. `cake.arch.WGMMA_ISSUE_REGISTERS` is
read off these rows; the probe shows where the check and ptxas agree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from cake.agents.mutations import widened, with_param_default
from cake.ir import analysis as an
from cake.ir import check as checker
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.transforms import apply
from cake.ir.transforms.refit_forms import refit_forms
from cake.lowering.cuda.backend import CudaKernel
from cake.lowering.cuda.compile import CompileError

from cake.arch import arch as arch_spec
from cake.diagnostics import DiagnosticError

REPO = Path(__file__).resolve().parents[1]
CHILD = REPO / "results/h200-2026-12-05/s28/evolve_seed15/run/candidates/0d78b7201427db8b.cake"
# Session 27's best: its consumers hold the point tile in registers, the wgmma's A operand (`hold`)
HELD = REPO / "results/h100-2026-12-05/s27/evolve_seed14/best.cake"
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}
ARCH = "sm_90a"
# (schedule, CONSUMERS, BN, BK, CONSUMER_REGS, STAGES): a 64-register fragment (BK 128) from 2 to 7 consumer
# warpgroups, a 128-row tile (two fragments a role), a 32-register fragment (BK 64) at 7 consumers (the child's
# parent), a 128-register fragment (BK 256, one stage to fit shared memory; BK's domain widened to hold it) at 2 and 3;
# then the held kernel with a 64-register fragment beside 32 registers of held A at caps of 128 and 96.
POINTS = ((CHILD, 2, 64, 128, 64, 2), (CHILD, 3, 64, 128, 64, 2), (CHILD, 4, 64, 128, 64, 2),
          (CHILD, 5, 64, 128, 64, 2), (CHILD, 6, 64, 128, 72, 2), (CHILD, 7, 64, 128, 64, 2),
          (CHILD, 3, 128, 128, 128, 2), (CHILD, 7, 64, 64, 64, 2), (CHILD, 2, 64, 256, 168, 1),
          (CHILD, 3, 64, 256, 128, 1), (HELD, 3, 64, 128, 160, 4), (HELD, 4, 64, 128, 112, 4))


def _widened_bk(kernel: n.Kernel) -> n.Kernel:
    """`kernel` with 256 in BK's domain (the widest wgmma N), so a point may choose it."""
    return replace(kernel, params=tuple(replace(p, domain=widened(p.domain, 256)) if p.name == "BK" else p
                                        for p in kernel.params))


def _e0308(kernel: n.Kernel) -> str | None:
    found = [d for d in checker.check(kernel, arch=ARCH, backend="cuda", dims=CELL) if d.code == "E0308"]
    return found[0].message if found else None


def _ptxas(kernel: n.Kernel, label: str) -> tuple[bool, int | None, str]:
    """(compiled, the register target ptxas asked for, its first line) with E0308 lifted."""
    lifted = checker.all_checks
    checker.all_checks = lambda: tuple(s for s in lifted() if s.id != "E0308")  # type: ignore[assignment]
    try:
        built = CudaKernel(kernel, ARCH, label)
        built.build({v.name: n.DType.BF16 for v in kernel.dtype_vars}, built.statics(CELL),
                    arch_spec(ARCH).compute_capability)
        return True, None, "compiled"
    except CompileError as error:
        target = re.search(r"register target of (\d+)", str(error))
        return False, int(target.group(1)) if target else None, str(error).splitlines()[0][:160]
    finally:
        checker.all_checks = lifted  # type: ignore[assignment]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ["CAKE_CACHE_DIR"] = tempfile.mkdtemp(prefix="cake-probe-")  # compile, never read a cached cubin
    bases = {path: _widened_bk(parse(path.read_text(), path.name)) for path in (CHILD, HELD)}
    rows = []
    print(f"{'schedule':<8} {'consumers':>9} {'BN':>4} {'BK':>4} {'regs':>4} {'threads':>7} {'cap':>4} {'fragment':>8}  "
          f"{'ptxas':<22} E0308")
    for path, consumers, bn, bk, regs, stages in POINTS:
        kernel = bases[path]
        for name, value in (("CONSUMERS", consumers), ("BN", bn), ("BK", bk), ("CONSUMER_REGS", regs),
                            ("STAGES", stages)):
            kernel = with_param_default(kernel, name, value)
        kernel = apply(refit_forms, kernel)  # the wgmma's N follows BK
        main_launch = next(la for la in kernel.launches if la.name == "main")
        env = an.default_env(kernel, CELL, {v.name: n.DType.BF16 for v in kernel.dtype_vars})
        threads = an.setmaxnreg_threads(main_launch, env)
        cap = an.default_regs_per_thread(threads, arch_spec(ARCH))
        try:
            compiled, target, said = _ptxas(kernel, f"c{consumers}_bn{bn}_bk{bk}_r{regs}")
        except DiagnosticError as error:  # another check refused it: not a ptxas point
            compiled, target, said = False, None, f"checker: {error}"[:160]
        refused = _e0308(kernel)
        row = {"schedule": "child" if path is CHILD else "held", "consumers": consumers, "BN": bn, "BK": bk,
               "stages": stages, "consumer_regs": regs, "threads": threads, "cap": cap, "fragment": 64 * bk // 128,
               "ptxas_compiled": compiled, "ptxas_target": target, "ptxas": said, "e0308": refused}
        rows.append(row)
        ptxas = "ok" if compiled else f"refused (target {target})"
        print(f"{row['schedule']:<8} {consumers:>9} {bn:>4} {bk:>4} {regs:>4} {threads:>7} {cap:>4} {row['fragment']:>8}  {ptxas:<22} "
              f"{'refuses' if refused else 'accepts'}", flush=True)
    agree = sum(r["ptxas_compiled"] == (r["e0308"] is None) for r in rows)
    print(f"E0308 agrees with ptxas on {agree} of {len(rows)}")
    if args.json:
        args.json.write_text(json.dumps({"child": str(CHILD.relative_to(REPO)), "held": str(HELD.relative_to(REPO)),
                                         "rows": rows, "agree": agree}, indent=1))
    return 0 if agree == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
