# H200 session 5, call 4 (issues 14, 15, 18): the KDA chunk-parallel schedule with tf32x3 state products (bf16
# gates under seeds 0 1, then timed at the six shapes: scripts/gpu/s5_kda5.sh without its profile stage), the
# exported op's host time without dead memsets (scripts/gpu/s5_host5.sh), and update_ranked's fp16 gates (cut at
# 40 s in call 3). The stage files share $RES.
export RES=${RES:-/tmp/res}
SKIP_STAGES="kda5_profile" bash scripts/gpu/s5_kda5.sh
bash scripts/gpu/s5_host5.sh
source scripts/gpu/lib.sh
stage upd5_verify_f16 60 env CAKE_BACKEND=triton python3 -m cake verify --schedule experiments/kmeans/update_ranked.cake \
  --device cuda --all-gates --timeout 55 --seeds 0 1 --dtypes fp16 --json $RES/upd5_verify_f16.json
cat $RES/stages.txt
