# H200 session 5, issue 18 (branch upd5): update_ranked.cake, the counting-sort update with the in-tile rank by
# `rank_equal` (a tile sort) over wide point tiles, now the op's default update. 200 s at most; ~145 s expected.
# Run from the repository root with carry [".whl"].
# a. upd5_verify_f16 / upd5_verify_bf16: every kmeans_update gate under seeds 0 1, Triton backend. Look for
#    "kmeans_update: PASSED" at the end of each log (ORD-02 bits across runs and launches, EXC-02 subnormals,
#    POISON, empty clusters keep c_old). ~20 s each (compile + two batteries).
# b. upd5_bench: scripts/gpu_update_bench.py at all five shapes in ONE timed process (after its own gates at
#    seed 0 and an untimed compile process), interleaved with flash-kmeans and torch index_add, cold L2. Look
#    at the table's `fk/ours` column (ratio of medians; the bootstrap speedup columns need 3 processes and say
#    undefined) and `ours/floor`; $RES/upd5_bench/gpu_update_bench.json. ~60 s (gates at seed 0 ~25 s, the
#    compile process <= 20 s, the timed process ~20 s: worst case 85 s).
# c. upd5_profile: scripts/gpu_update_sorted.py --variants ranked at large_n and fk_fp16: update_ranked at
#    BN = 1024 (default), 512 and 2048 timed beside flash-kmeans, and the default's five launches (profiler;
#    compare with update_sorted at large_n: scan_tiles 0.297, scatter 0.103, reduce 0.119 ms). ~40 s.
source scripts/gpu/lib.sh
V="python3 -m cake verify --schedule experiments/kmeans/update_ranked.cake --device cuda --all-gates --timeout 30 --seeds 0 1"
stage upd5_verify_f16 40 env CAKE_BACKEND=triton $V --dtypes fp16 --json $RES/upd5_verify_f16.json
stage upd5_verify_bf16 35 env CAKE_BACKEND=triton $V --dtypes bf16 --json $RES/upd5_verify_bf16.json
stage upd5_bench 85 python3 scripts/gpu_update_bench.py --out $RES/upd5_bench --processes 1 --reps 15 \
  --max-seconds 1 --warmup-timeout 20 --process-timeout 35 --gate-timeout 30
stage upd5_profile 40 python3 scripts/gpu_update_sorted.py --out $RES/upd5_profile --variants ranked \
  --shapes large_n fk_fp16 --max-seconds 1
cat $RES/stages.txt
