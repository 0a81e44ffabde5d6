# H200 session 4, last call (issues 18, 12, 14): the counting-sort update at its new default (BN = 128,
# SWARPS = 4) at all five shapes against flash-kmeans (3 processes), `cake check`'s median time per schedule on
# the GPU host's idle CPU, and the chunk-parallel KDA seed (bf16 gates under seeds 0 and 1, then timed against
# fla chunk_kda at FlashKDA's six shapes).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage bench_check 40 python3 scripts/bench_check.py --repeat 30 --out $RES/bench_check.json
stage update_bench 150 python3 scripts/gpu_update_bench.py --out $RES/update --processes 3
stage kda_verify 140 cake verify --device cuda --timeout 130 --dtypes bf16 --seeds 0 1 \
  --schedule experiments/kda/kda_fused_chunkpar.cake --json $RES/verify_kda_chunkpar.json
stage kda_bench 100 python3 scripts/gpu_kda_bench.py --json $RES/kda_bench_chunkpar.json \
  --schedule experiments/kda/kda_fused_chunkpar.cake --seed-verdict $RES/verify_kda_chunkpar.json
cat $RES/stages.txt
