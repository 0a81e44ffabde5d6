# H200 session 2, call 4: the clean-start evolve again after two fixes the first run pointed to (the cost
# model charges consumers that reduce a swizzled stage themselves; warp_specialize hoists such reductions),
# then the deterministic update's full battery on the GPU with the time the first call did not give it.
source scripts/gpu/lib.sh
stage evolve2 310 python3 scripts/gpu_evolve.py --minutes 5 --backend cuda --evals-per-turn 4 --out $RES/evolve2
stage verify_update_onehot2 130 cake verify --device cuda --all-gates --timeout 120 --schedule experiments/kmeans/update_onehot.cake --json $RES/verify_update_onehot.json
cat $RES/stages.txt
