# H200 session 5, call 1 (issues 14, 17): the chunk-parallel KDA seed timed against fla chunk_kda at FlashKDA's six
# shapes (its bf16 verdict under seeds 0 and 1 is session 4's, s4-call5, on the unchanged schedule), then the
# cost model's timing data (scripts/gpu/s4_costmodel.sh: ~500 legal assign variants as 3 runs per backend).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage kda_bench 230 python3 scripts/gpu_kda_bench.py --json $RES/kda_bench_chunkpar.json \
  --schedule experiments/kda/kda_fused_chunkpar.cake \
  --seed-verdict results/h200-2026-12-02/s4-call5/verify_kda_chunkpar.json
stage costmodel_variants 290 python3 scripts/gpu_time_variants.py --out $RES/costdata --runs 3 --seed 0 \
  --workers 12 --budget-s 230 --drain-s 25
cat $RES/stages.txt
