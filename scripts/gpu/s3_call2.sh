# H200 session 3, call 2 (issues 16 and 12): the verifier's GPU half (s3_verify.sh: GPU calibration, battery
# time with compilation apart, multi-seed verdicts of the ping-pong and the plain assign, the self-test on the
# GPU), the new strongest baseline (the hand-written Triton assign) through every gate under three seeds, and
# the wgmma widths the arch table added (scripts/gpu_mma_widths.py: right answers on the GPU, not only nvcc).
bash scripts/gpu/s3_verify.sh
source scripts/gpu/lib.sh
stage triton_assign_gates 100 cake verify --op kmeans_assign --kernel experiments/kmeans/triton_assign.py:assign \
  --device cuda --dtypes bf16 fp16 --all-gates --no-cache --timeout 60 --seeds 0 1 2 --json $RES/verify_triton_assign.json
stage mma_widths 150 sh -c 'OUT=$RES python3 scripts/gpu_mma_widths.py'
cat $RES/stages.txt
