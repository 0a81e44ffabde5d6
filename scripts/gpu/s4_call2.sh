# H200 session 4, call 2 (issues 18, 16, 12): the deterministic update's gates in every dtype (seeds 0 1 2),
# the update against flash-kmeans at all five shapes (3 processes, floor beside), the GPU tolerance tables,
# and the wgmma widths after the stage-stride fix. Stages as in s4_update.sh, s4_lloyd.sh, s4_tolerances.sh.
source scripts/gpu/lib.sh
V="python3 -m cake verify --schedule experiments/kmeans/update_sorted.cake --device cuda --all-gates --timeout 90 --seeds 0 1 2"
stage update_verify_f32 80 env CAKE_BACKEND=triton $V --dtypes fp32 --json $RES/update_sorted_verify_f32.json
stage update_verify_f16 80 env CAKE_BACKEND=triton $V --dtypes fp16 --json $RES/update_sorted_verify_f16.json
stage update_verify_bf16 80 env CAKE_BACKEND=triton $V --dtypes bf16 --json $RES/update_sorted_verify_bf16.json
stage lloyd_update_bench 250 python3 scripts/gpu_update_bench.py --out $RES/update --processes 3
OPS="softmax rmsnorm row_sum matmul kmeans_assign kmeans_update"
rm -f experiments/starter/tolerances_cuda.json experiments/kmeans/tolerances_cuda.json
stage tolerances_eager 65 sh -c "python3 -m cake.verifier.calibrate --device cuda --no-triton --op $OPS; rc=\$?;
  mkdir -p $RES/eager && cp experiments/starter/tolerances_cuda.json $RES/eager/starter_tolerances_cuda.json &&
  cp experiments/kmeans/tolerances_cuda.json $RES/eager/kmeans_tolerances_cuda.json; exit \$rc"
stage tolerances_check 15 python3 scripts/check_tolerance_tables.py --out $RES/check_eager.json \
  --pair experiments/starter/tolerances.json $RES/eager/starter_tolerances_cuda.json \
  --pair experiments/kmeans/tolerances.json $RES/eager/kmeans_tolerances_cuda.json
stage mma_widths 60 env OUT=$RES python3 scripts/gpu_mma_widths.py --jobs 12
cat $RES/stages.txt
