"""The compile-ahead process: `python -m cake.evaluation.ahead_worker REQUEST.json RESULT.json`.

Loads the candidate the way the verifier's worker does (`load_kernel` of the same `KernelRef`, so the lowering
and its cache keys are the evaluation's own), plans the calls its batteries make, and compiles their
specializations (`cake.evaluation.ahead`). Writes {"report": AheadReport} or {"error": why the kernel did not
load}; anything else (a crash in codegen, a hang) ends or outlives the process and its parent reports it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from cake.evaluation.ahead import AHEAD_NICE, AheadRequest, planned_calls

EXIT_SETUP = 2


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m cake.evaluation.ahead_worker REQUEST.json RESULT.json", file=sys.stderr)
        return EXIT_SETUP
    os.nice(AHEAD_NICE)  # below the evaluation that may be timing on the GPU now; nvcc inherits it
    request = AheadRequest.from_json(json.loads(Path(argv[0]).read_text()))
    out = Path(argv[1])
    from cake.lowering.ahead import AheadReport
    from cake.lowering.runtime import LoadedKernel
    from cake.verifier.worker_main import load_kernel

    kernel = load_kernel(request.kernel)
    if isinstance(kernel, str):
        out.write_text(json.dumps({"error": kernel}))
        return EXIT_SETUP
    if not isinstance(kernel, LoadedKernel):  # a workload's adapter around the schedule: its calls are its own
        report = AheadReport(unsupported=f"{request.kernel.describe()} is not a lowered schedule's callable")
    else:
        calls = planned_calls(request.op, request.dtypes, request.seeds)
        report = kernel.compile_ahead(calls, capability=request.capability, jobs=request.jobs)
    out.write_text(json.dumps({"report": report.to_json()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
