# H200 session 2, call 2: baselines and our schedules at every shape, and the Lloyd iteration composed of
# the ping-pong assign and the deterministic update, against batch_kmeans_Euclid (issue 6).
source scripts/gpu/lib.sh
stage bench_shapes 230 python3 scripts/gpu_bench_shapes.py --out $RES --max-seconds 2 --lloyd-assign assign_pingpong --lloyd-update update_onehot
cat $RES/stages.txt
