# One batched H200 session, in priority order: the CUDA backend, the lowered schedules under the gates, the
# shape domain, a short clean-start evolution, flash-kmeans' per-dtype verdicts. Every stage has its own
# time limit; results accumulate under $RES and are packed into $OUT/results.tgz after each stage, so a
# stage that runs out of time loses only itself.
source scripts/gpu/lib.sh
stage cuda_assign 170 python3 scripts/gpu_cuda_assign.py --out $RES
stage verify_pingpong_cuda 60 env CAKE_BACKEND=cuda cake verify --schedule experiments/kmeans/assign_pingpong.cake --device cuda --dtypes bf16 --all-gates --json $RES/verify_pingpong_cuda.json
stage verify_assign_plain 60 cake verify --schedule experiments/kmeans/assign_plain.cake --device cuda --all-gates --json $RES/verify_assign_plain.json
stage verify_update_atomic 45 cake verify --schedule experiments/kmeans/update_atomic.cake --device cuda --all-gates --json $RES/verify_update_atomic.json
stage bench_shapes 90 python3 scripts/gpu_bench_shapes.py --out $RES --max-seconds 2
stage evolve 100 python3 scripts/gpu_evolve.py --minutes 1.4 --out $RES/evolve
stage verify_fk_assign 40 cake verify --op kmeans_assign --kernel experiments/kmeans/audit_targets.py:flash_kmeans_assign --device cuda --all-gates --json $RES/verify_fk_assign.json
cat $RES/stages.txt
