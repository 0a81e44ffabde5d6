# H200, the next session's first call (issues 14, 17, 18), ready to run with carry [".whl"]; about 9.5 minutes.
# What session 5 left unmeasured, in order of what it unblocks:
# 1. kda_tolerances (~60 s): the KDA GPU tolerance table over seeds 0-3 (experiments/kda/tolerances_cuda.json does
#    not exist; the CPU table was recalibrated after session 5's GPU verdicts). Look for coefficients <= 100 and a
#    worst control ratio <= 1; commit $RES/kda_tolerances_cuda.json as experiments/kda/tolerances_cuda.json.
# 2. kda_verify (~100 s): the chunk-parallel KDA seed under the recalibrated table (session 5's pass was under the
#    old one, whose `o` tolerance was 12x |ref|), bf16, seeds 0 1.
# 3. update_ranked / update_sorted (~60 s each): each variant set at the five shapes against flash-kmeans (which
#    default per shape; session 5: ranked wins at cell, fk_fp16, large_n; sorted at d64, k128).
# 4. lloyd (~120 s): the Lloyd iteration with the new default update at the cell, 3 processes (session 4's 1.353x
#    used update_sorted at BN = 256).
# 5. evolve (~4.5 min incl. report): a clean-start evolve seed of the assign on the CUDA backend (issue 17 needs
#    three; session 5's died on the `openai` import, fixed).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage kda_tolerances 70 sh -c "python3 -m cake.verifier.calibrate --device cuda --op kda_forward --seeds 0 1 2 3; rc=\$?;
  cp experiments/kda/tolerances_cuda.json $RES/kda_tolerances_cuda.json; exit \$rc"
stage kda_verify 110 cake verify --device cuda --timeout 100 --dtypes bf16 --seeds 0 1 \
  --schedule experiments/kda/kda_fused_chunkpar.cake --json $RES/verify_kda.json
for set in ranked sorted; do
  stage update_$set 60 python3 scripts/gpu_update_sorted.py --out $RES/update_$set --variants $set \
    --shapes cake_cell fk_fp16 large_n d64 k128 --max-seconds 1
done
stage lloyd 130 python3 scripts/gpu_lloyd_bench.py --out $RES/lloyd --shapes cake_cell --processes 3
stage evolve 300 python3 scripts/gpu_evolve.py --minutes 4.5 --backend cuda --evals-per-turn 4 --seed 1 --out $RES/evolve
cat $RES/stages.txt
