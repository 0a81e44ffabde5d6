# H200 session 11, call 2 (issue 15), carry [".whl"]; about 7 minutes, one 420 s budget.
# `bash scripts/gpu/s11_call2.sh experiments/kmeans/SCHEDULE.cake`: the export evidence for a one-launch assign
# that reached the two-launch interval in call 1 (s11_call1.sh) and passed its gates.
# 1. host_*: the exported op's host time per call through torch.ops (C++ path), 5 processes, and their summary.
# 2. export + export_graph_cell: the package at D = 8 and 128; the exported op against CAKE's own callable at the
#    cell, graph capture and replay (ids equal to eager), and out-variant checks (gpu_export.py).
# 3. certify: `cake certify` on the package in bf16 and fp16 (a certificate row for this device).
# 4. bench_cell: `cake bench` at the cell interleaved with every baseline (triton_assign is the strongest).
# Look for: host_summary.log's per-call microseconds, export/*.json, "certify" verdicts, bench_schedule.json.
source scripts/gpu/lib.sh
ONE=${1:?the schedule to export}
budget 420
export_evidence "$ONE" s11 5
pack
cat $RES/stages.txt
