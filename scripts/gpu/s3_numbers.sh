# H200, issue 16 ("Honest numbers"), ~7 minutes of GPU time: run from the repository root with carry [".whl"].
# 1. sweep: the hand-written Triton assign (experiments/kmeans/triton_assign.py) over a pruned grid of
#    tile sizes, warps and stages at every shape of the workload; writes the per-shape table of best configs
#    with its provenance ($RES/triton_assign_configs.json -> commit as experiments/kmeans/); every config is
#    compiled first on 8 processes in parallel (compiles, not timing, are what the sweep spends its GPU time on).
# 2. headlines: the ping-pong (CUDA backend), the evolved best, the Triton-lowered plain assign and both
#    updates, each in 3 fresh processes interleaved (seeded shuffled order) with the best baselines at every
#    shape (the hand-written Triton assign at the table's config, flash-kmeans 0.3.1, torch); writes
#    $RES/headlines/{headlines.json,headlines.md,process_*.json}: medians over processes, bootstrap 95% intervals,
#    every sample. A stage that runs out of time loses only itself (results packed after each stage); the
#    headlines can be recomputed from the process payloads on a CPU (`python3 scripts/gpu_headlines.py --out DIR --aggregate-only`).
source scripts/gpu/lib.sh
stage sweep 150 python3 scripts/sweep_triton_assign.py --out $RES/triton_assign_configs.json \
  --bn 128 256 --bk 64 128 --warps 4 8 --stages 2 3 --reps 15 --max-seconds 1.5 --budget-s 100 --compile-workers 8
stage headlines 255 python3 scripts/gpu_headlines.py --out $RES/headlines --processes 3 --seed 0 \
  --triton-configs $RES/triton_assign_configs.json --reps 30 --max-seconds 1.5 --warmup-timeout 100 --process-timeout 50
cat $RES/stages.txt
