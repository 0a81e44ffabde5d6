# Issue 14 on one H200 (<= 5 min of GPU): fla-core 0.6.0's KDA kernels under the kda_forward contract gates
# (verdicts with replay tokens), the fused seed schedule verified in bf16, then fla chunk_kda (fused flags,
# FLA_FLASH_KDA=0) timed at FlashKDA's six shapes interleaved with the seed (cold L2), JSON in results.tgz.
# Run from the repository root with carry [".whl"]; needs in .whl/ (py3-none-any wheels): lark-1.3.1,
# fla_core-0.6.0 and einops-0.8.2 (fla-core's one dependency).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
# Most of each verify stage is Triton compiling: K and V are constexprs, one compile per (K, V) pair the battery
# visits (nine on the GPU profile). The seed and the benchmark go first, the audits after, so time running out
# loses an audit (a stage cut by its limit writes no verdict JSON; its log says so), not the benchmark.
stage verify_seed 100 cake verify --device cuda --timeout 90 --dtypes bf16 \
  --schedule experiments/kda/kda_fused_chunk16.cake --json $RES/verify_seed.json
stage bench 80 python3 scripts/gpu_kda_bench.py --json $RES/kda_bench.json --seed-verdict $RES/verify_seed.json \
  --schedule experiments/kda/kda_fused_chunk16.cake
# fla chunk_kda: every gate in bf16 (the benchmark dtype); fused_recurrent: fp32/fp16/bf16 to the first failing gate.
stage verify_fla_chunk 60 cake verify --op kda_forward --device cuda --timeout 25 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
stage verify_fla_recurrent 40 cake verify --op kda_forward --device cuda --timeout 20 \
  --kernel experiments/kda/audit_targets.py:fla_fused_recurrent_kda --json $RES/verify_fla_fused_recurrent_kda.json
cat $RES/stages.txt
