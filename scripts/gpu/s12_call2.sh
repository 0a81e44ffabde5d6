# H200 session 12, call 2 (issue 15), carry [".whl"]; about 5 minutes, one 330 s budget.
# Issue 15's export evidence for the fused ping-pong (assign_pingpong_coop.cake, one cooperative launch a call):
# host time in 3 processes, the exported op at D = 8 and 128 against CAKE's own callable with CUDA-graph capture and
# replay (a cooperative launch must be capturable), `cake certify` in bf16 and fp16, and `cake bench` at the cell
# against every baseline (lib.sh's export_evidence). Look for: host/host_summary.log "across runs", the
# export/*.json graph lines ("identical"), certify.log PASSED, bench_cell.log's table.
source scripts/gpu/lib.sh
budget 330
export_evidence experiments/kmeans/assign_pingpong_coop.cake s12coop 3
pack
cat $RES/stages.txt
