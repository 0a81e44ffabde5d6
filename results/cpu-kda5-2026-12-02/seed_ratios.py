"""Each correct kda_forward control's worst bf16 case per seed, in model units (calibrate.ratios), against the
committed seed-0 table's coefficient: `python seed_ratios.py > seed_ratios.log` (CPU, TRITON_INTERPRET unset)."""

import torch
from cake.verifier import calibrate
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.tolerance import load_table

OP = "kda_forward"
contract = get_contract(OP)
controls = get_controls(OP).named()
coefficient = load_table(contract.tolerance.table).coefficient(OP, torch.bfloat16)
for seed in range(4):
    for name in ("torch", "sequential"):
        found = calibrate.ratios(contract, controls[name], torch.bfloat16, False, "cpu", name, seed)
        worst = max(found, key=lambda r: r.ratio)
        print(f"seed {seed} {name:10} cases {len(found)} max ratio {worst.ratio:8.1f} = "
              f"{worst.ratio / coefficient:.2f}x the table's bf16 coefficient {coefficient}  worst "
              f"{worst.case.gate_id} {worst.case.describe()[:70]}", flush=True)
