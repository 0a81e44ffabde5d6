"""Calibrate KDA's tolerance coefficients on its correct controls and merge them into the verifier's table:
`python -m cake.experiments.kda.calibrate` (rewrites the kda_* entries of verifier/data/tolerances.json, the
one place tolerance numbers live; the method is the verifier's, see cake.verifier.calibrate)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cake.experiments.kda.controls import CONTROLS
from cake.verifier.calibrate import calibrate_op
from cake.verifier.contracts import get_contract
from cake.verifier.tolerance import TABLE_PATH


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cake.experiments.kda.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TABLE_PATH)
    args = parser.parse_args(argv)
    data = json.loads(args.out.read_text())
    for op, controls in CONTROLS.items():
        data["ops"][op] = calibrate_op(get_contract(op), [(name, kernel, False) for name, kernel in controls.items()])
        print(op, json.dumps({d: e["coefficient"] for d, e in data["ops"][op].items()}))
    args.out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
