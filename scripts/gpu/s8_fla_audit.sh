# H200, a later session's call (issue 14's audit of fla), with carry [".whl"]; about 9 minutes (limits 290 + 230). Written for
# session 7's third call, which went to the update fix, the Lloyd iteration and the host path instead.
# fla-core 0.6.0's KDA kernels under every kda_forward gate in bf16 (issue 14 item 6). Sessions 3 and 4 cut both at
# 40-170 s: each (K, V) pair the battery visits compiles fla's Triton kernels (autotuned) anew, and no verdict was
# written. This call gives each the time it needs; look for "kda_forward: PASSED/FAILED" and the replay tokens of any
# failed case (RESULTS.md records them as findings, as flash-kmeans' update failures were).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage verify_fla_chunk 290 cake verify --op kda_forward --device cuda --timeout 270 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
stage verify_fla_recurrent 230 cake verify --op kda_forward --device cuda --timeout 210 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_fused_recurrent_kda --json $RES/verify_fla_fused_recurrent_kda.json
cat $RES/stages.txt
