# H200 session 11, call 3 (issues 15 and 17), carry [".whl"]; about 5 minutes, one 300 s budget.
# 1. Host time of one launch against two, on the same host (issue 15): the exported two-launch ping-pong
#    (assign_pingpong.cake: centroid_norms, then assign) and the one-launch assign_pingpong_prodnorm.cake, each
#    exported at D=128 and timed by gpu_host_overhead.py in 3 processes, alternating (~80 s). The per-call
#    difference is the second launch's host cost. Look at host_summary_two.log / host_summary_one.log.
# 2. scripts/gpu/s11_cost.sh's stages (issue 17 item 3, ~190 s): every legal CUDA variant timed kernel-only
#    (CUDA-graph replay) at B=8, codegen 4, into $RES/cost11; see that script's header.
source scripts/gpu/lib.sh
budget 300
export CAKE_EXPORT_CACHE=/tmp/s11_launcher
mkdir -p $RES/host_two $RES/host_one
budgeted export_two 15 10 cake export experiments/kmeans/assign_pingpong.cake --backend cuda --arch sm_90a \
  --static D=128 --name cake_s11_two -o /tmp/s11_two
budgeted export_one 15 10 cake export experiments/kmeans/assign_pingpong_prodnorm.cake --backend cuda --arch sm_90a \
  --static D=128 --name cake_s11_one -o /tmp/s11_one
budgeted build_launcher 25 20 python3 -c "from cake.export.runtime import _launcher; print(_launcher.build())"
for i in 1 2 3; do
  for k in two one; do
    budgeted host_${k}_$i 10 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py \
      --package /tmp/s11_$k --label ${k}_$i --out $RES/host_$k
  done
done
for k in two one; do
  budgeted host_summary_$k 14 8 python3 scripts/gpu_host_overhead.py --summarize $RES/host_$k/host_${k}_1.json \
    $RES/host_$k/host_${k}_2.json $RES/host_$k/host_${k}_3.json --out $RES/host_$k
done
budgeted cost11_graph 165 60 python3 scripts/gpu_time_variants.py --out "$RES/cost11/costdata" --backend cuda \
  --clock graph --runs 3 --workers 12 --budget-s 130 --drain-s 15
pack
cat $RES/stages.txt
