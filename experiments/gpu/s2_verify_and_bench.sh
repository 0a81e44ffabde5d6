# H200 session 2, call 1: the lowered kmeans schedules under `cake verify --device cuda` (issues 4, 5),
# the ping-pong variants through `cake bench` (issue 5), and every shape plus the Lloyd iteration (issue 6).
source experiments/gpu/lib.sh
V="cake verify --device cuda --all-gates --timeout 120"
stage verify_update_onehot 130 $V --schedule experiments/flash_kmeans/update_onehot.cake --json $RES/verify_update_onehot.json
stage verify_assign_plain 150 $V --schedule experiments/flash_kmeans/assign_plain.cake --json $RES/verify_assign_plain.json
stage verify_pingpong 45 env CAKE_BACKEND=cuda $V --schedule experiments/flash_kmeans/assign_pingpong.cake --dtypes bf16 fp16 --json $RES/verify_pingpong.json
stage verify_plain_cuda 45 env CAKE_BACKEND=cuda CAKE_ARCH=sm_90a $V --schedule experiments/flash_kmeans/assign_plain.cake --dtypes bf16 fp16 --json $RES/verify_plain_cuda.json
stage variants 170 python3 -m cake.experiments.gpu_assign_variants --out $RES/variants --max-seconds 3
cat $RES/stages.txt
