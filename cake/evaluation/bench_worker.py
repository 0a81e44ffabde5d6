"""The isolated bench process: `python -m cake.evaluation.bench_worker REQUEST.json RESULT.json`.

The evaluator times each candidate in a process of its own, pinned to one GPU (CUDA_VISIBLE_DEVICES), so a
kernel that corrupts its context or hangs costs only this process. The request is a `BenchRequest` and the
result a `BenchTimes`, both as typed JSON, with the whole `BenchRun` beside it (every sample, kept by the
evaluator next to the candidate); a setup failure is written as {"error": ...} with exit status 2,
and a bug in CAKE (`InternalError`) as {"internal": ...} with exit status `INTERNAL_EXIT_CODE`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cake.errors import INTERNAL_EXIT_CODE, InternalError
from cake.evaluation.bench import BenchSetupError, bench_kernel, request_from_json

EXIT_SETUP = 2


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m cake.evaluation.bench_worker REQUEST.json RESULT.json", file=sys.stderr)
        return EXIT_SETUP
    request = request_from_json(json.loads(Path(argv[0]).read_text()))
    out = Path(argv[1])
    try:
        run = bench_kernel(request)
    except BenchSetupError as error:
        out.write_text(json.dumps({"error": str(error)}))
        return EXIT_SETUP
    except InternalError as error:  # a CAKE bug, reported as one: never a verdict about the candidate
        out.write_text(json.dumps({"internal": error.report()}))
        return INTERNAL_EXIT_CODE
    out.write_text(json.dumps({"times": run.times().to_json(), "run": run.to_json()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
