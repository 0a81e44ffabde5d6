# H200 session 2, call 1: the lowered kmeans schedules under `cake verify --device cuda` (issues 4, 5),
# and the ping-pong variants through `cake bench` (issue 5).
source scripts/gpu/lib.sh
V="cake verify --device cuda --all-gates --timeout 120"
stage verify_update_onehot 100 $V --schedule experiments/kmeans/update_onehot.cake --json $RES/verify_update_onehot.json
stage verify_assign_plain 120 $V --schedule experiments/kmeans/assign_plain.cake --json $RES/verify_assign_plain.json
stage verify_pingpong 35 env CAKE_BACKEND=cuda $V --schedule experiments/kmeans/assign_pingpong.cake --dtypes bf16 fp16 --json $RES/verify_pingpong.json
stage verify_plain_cuda 35 env CAKE_BACKEND=cuda CAKE_ARCH=sm_90a $V --schedule experiments/kmeans/assign_plain.cake --dtypes bf16 fp16 --json $RES/verify_plain_cuda.json
stage variants 150 python3 scripts/gpu_assign_variants.py --out $RES/variants --max-seconds 3
cat $RES/stages.txt
