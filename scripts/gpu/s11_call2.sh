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
HOST=/tmp/s11_host; PKG=/tmp/s11_export
rm -rf $HOST $PKG; mkdir -p $RES/host $RES/export
export CAKE_EXPORT_CACHE=/tmp/s11_launcher
budgeted host_export 15 10 cake export $ONE --backend cuda --arch sm_90a --static D=128 --name cake_s11_host -o $HOST
budgeted host_build_launcher 25 20 python3 -c "from cake.export.runtime import _launcher; print(_launcher.build())"
for i in 1 2 3 4 5; do
  budgeted host_cpp_$i 10 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package $HOST \
    --label cpp_$i --out $RES/host
done
budgeted host_summary 14 8 python3 scripts/gpu_host_overhead.py --summarize $RES/host/host_cpp_1.json \
  $RES/host/host_cpp_2.json $RES/host/host_cpp_3.json $RES/host/host_cpp_4.json \
  $RES/host/host_cpp_5.json --out $RES/host
budgeted export 60 30 cake export $ONE --backend cuda --arch sm_90a --static D=8,128 --name cake_kmeans_one -o $PKG
budgeted export_graph_cell 90 40 python3 scripts/gpu_export.py --package $PKG --schedule $ONE --out $RES/export
budgeted certify 100 50 cake certify $PKG --device cuda --dtypes bf16 fp16
cp $PKG/cake_kmeans_one/certificate.json $RES/export/certificate.json 2>/dev/null; pack
budgeted bench_cell 60 30 env CAKE_BACKEND=cuda cake bench --schedule $ONE --shapes cake_cell --reps 50 \
  --max-seconds 15 --json $RES/export/bench_schedule.json
pack
cat $RES/stages.txt
