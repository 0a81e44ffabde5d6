# H200, a later session's call (issue 14), carry [".whl"]; about 9.5 minutes (limits 330 + 150 + 100).
# 1. fla chunk_kda under every kda_forward gate in bf16 (the audit). Sessions 3, 4 and 8 cut it at 40-330 s: each
#    shape the battery visits autotunes fla's Triton kernels anew (84-98 s for the first at H = 96). With
#    TRITON_CACHE_AUTOTUNING=1 each autotune is kept on disk, so the second stage resumes where the first was cut.
#    Look for "kda_forward: PASSED/FAILED" and the replay tokens in verify_fla_chunk*.log.
# 2. intra at 2 warps without a register cap (session 8's profile: 5.577 ms of kernels a call against 5.752 at the
#    defaults, intra 3.202 vs 3.378) under the gates in bf16, seeds 0 1; PASSED makes it the default.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
stage verify_fla_chunk 330 cake verify --op kda_forward --device cuda --timeout 300 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
stage verify_fla_chunk_resume 150 cake verify --op kda_forward --device cuda --timeout 140 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
stage kda_intra_w2 100 cake verify --schedule experiments/kda/kda_fused_chunkpar.cake --device cuda --dtypes bf16 \
  --seeds 0 1 --param WARPS_INTRA=2 --param REGS_INTRA=255 --json $RES/verify_kda_intra_w2.json
cat $RES/stages.txt
