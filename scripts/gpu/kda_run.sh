# Issue 14 on one H200 (<= 5 min of GPU): fla-core 0.6.0's KDA kernels under the kda_forward contract gates
# (verdicts with replay tokens), the fused seed schedule verified in bf16, then fla chunk_kda (fused flags,
# FLA_FLASH_KDA=0) timed at FlashKDA's six shapes interleaved with the seed (cold L2), JSON in results.tgz.
# Run from the repository root with carry [".whl"]; needs in .whl/ (py3-none-any wheels): lark-1.3.1,
# fla_core-0.6.0 and einops (fla-core's one dependency).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
V="cake verify --op kda_forward --device cuda --timeout 40"
stage verify_fla_chunk 70 $V --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
stage verify_fla_recurrent 45 $V --kernel experiments/kda/audit_targets.py:fla_fused_recurrent_kda \
  --json $RES/verify_fla_fused_recurrent_kda.json
stage verify_seed 90 cake verify --device cuda --timeout 60 --dtypes bf16 --schedule experiments/kda/kda_fused_chunk16.cake \
  --json $RES/verify_seed.json
stage bench 110 python3 scripts/gpu_kda_bench.py --json $RES/kda_bench.json --seed-verdict $RES/verify_seed.json
cat $RES/stages.txt
