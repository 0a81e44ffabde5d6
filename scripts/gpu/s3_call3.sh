# H200 session 3, call 3 (issues 14, 12, 16): the KDA workload on the GPU (kda_run.sh: our fused seed through
# the gates, fla chunk_kda timed at FlashKDA's six shapes interleaved with it, fla's kernels audited), the
# wgmma widths again with each width in a child process, and the GPU tolerance tables from the eager controls.
bash scripts/gpu/kda_run.sh
source scripts/gpu/lib.sh
stage mma_widths 170 env OUT=$RES python3 scripts/gpu_mma_widths.py
stage calibrate_eager 90 sh -c "python3 -m cake.verifier.calibrate --device cuda --no-triton \
  --op softmax rmsnorm row_sum matmul kmeans_assign kmeans_update && \
  cp experiments/starter/tolerances_cuda.json $RES/starter_tolerances_cuda.json && \
  cp experiments/kmeans/tolerances_cuda.json $RES/kmeans_tolerances_cuda.json"
cat $RES/stages.txt
