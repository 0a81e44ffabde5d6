# H200, issue 18 items 1-2: the deterministic counting-sort update (experiments/kmeans/update_sorted.cake).
# Run from the repository root with carry [".whl"]. Expected ~4 minutes in all; each stage is bounded, so a
# stage that runs out of time loses only itself (worst case ~6 minutes).
# a. update_verify_{f32,f16,bf16}: every gate of kmeans_update under seeds 0 1 2, Triton backend, one
#    dtype per stage. Look for "kmeans_update: PASSED" at the end of $RES/update_verify_*.log; ORD-02
#    (bits across runs), EXC-02 (subnormals) and POISON are the gates the atomic update fails. ~40-60 s each
#    (five launches compiled per dtype and per static D the gates meet, then the battery three times).
# b. update_bench: `cake bench` at fk_fp16 (B=32 N=75600 K=1000 D=128 fp16) interleaved with flash-kmeans'
#    update, the timing protocol of every bench (verdict from stage a's cache, else it runs the gates). Look for
#    the speedup over flash_kmeans in the log and $RES/update_sorted_bench.json. ~30-60 s.
# c. update_sweep: scripts/gpu_update_sorted.py at fk_fp16: six param assignments (each quick-checked:
#    fp64 spot check + bit-identical repeat) timed interleaved with flash-kmeans and torch index_add, the floor,
#    and the time of each of the five launches (profiler): the table in the log,
#    $RES/update_sorted/update_sorted.json. ~40 s.
source scripts/gpu/lib.sh
V="python3 -m cake verify --schedule experiments/kmeans/update_sorted.cake --device cuda --all-gates --timeout 90 --seeds 0 1 2"
stage update_verify_f32 80 env CAKE_BACKEND=triton $V --dtypes fp32 --json $RES/update_sorted_verify_f32.json
stage update_verify_f16 80 env CAKE_BACKEND=triton $V --dtypes fp16 --json $RES/update_sorted_verify_f16.json
stage update_verify_bf16 80 env CAKE_BACKEND=triton $V --dtypes bf16 --json $RES/update_sorted_verify_bf16.json
stage update_bench 90 env CAKE_BACKEND=triton python3 -m cake bench \
  --schedule experiments/kmeans/update_sorted.cake --shapes fk_fp16 --baseline flash_kmeans --max-seconds 5 \
  --json $RES/update_sorted_bench.json
stage update_sweep 70 python3 scripts/gpu_update_sorted.py --out $RES/update_sorted --shape fk_fp16 --max-seconds 3
cat $RES/stages.txt
