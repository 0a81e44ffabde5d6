import sys, torch
from cake.verifier import calibrate as cal
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.tolerance import load_table
op = "kda_forward"; c = get_contract(op); ctl = get_controls(op).named()
coef = load_table(c.tolerance.table).coefficient(op, torch.bfloat16)
for seed in range(4):
    for name in ("torch", "sequential"):
        rs = cal.ratios(c, ctl[name], torch.bfloat16, False, "cpu", name, seed)
        w = max(rs, key=lambda r: r.ratio)
        print(f"seed {seed} {name:10} cases {len(rs)} max ratio {w.ratio:8.1f} = {w.ratio/coef:.2f}x the table's bf16 coefficient {coef}  worst {w.case.gate_id} {w.case.describe()[:70]}", flush=True)
