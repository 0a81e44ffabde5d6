"""Each correct kda_forward control's worst case per seed and dtype, in model units (calibrate.ratios), and the
coefficient the committed table gives: `python seed_ratios.py > seed_ratios.log` (CPU, TRITON_INTERPRET unset)."""

import sys

import torch
from cake.verifier import calibrate
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.tolerance import load_table

OP = sys.argv[1] if len(sys.argv) > 1 else "kda_forward"
contract = get_contract(OP)
controls = get_controls(OP).named()
for dtype in (torch.bfloat16, torch.float16):
    coefficient = load_table(contract.tolerance.table).coefficient(OP, dtype)
    for seed in range(4):
        for name in ("torch", "sequential"):
            found = calibrate.ratios(contract, controls[name], dtype, False, "cpu", name, seed)
            worst = max(found, key=lambda r: r.ratio)
            print(f"{str(dtype)[6:]:8} seed {seed} {name:10} cases {len(found)} max ratio {worst.ratio:8.2f} = "
                  f"{worst.ratio / coefficient:.2f}x the table's coefficient {coefficient}  worst "
                  f"{worst.case.gate_id} {worst.case.describe()[:70]}", flush=True)
