# H200 session 4, call 1 (issues 12, 14): the wgmma widths again after the smem-alignment fix (each width in a
# child process, 8 at a time), and fla-core's KDA kernels under the kda_forward gates (cut short last session).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage mma_widths 200 env OUT=$RES python3 scripts/gpu_mma_widths.py --jobs 8
stage verify_fla_chunk 170 cake verify --op kda_forward --device cuda --timeout 60 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
stage verify_fla_recurrent 100 cake verify --op kda_forward --device cuda --timeout 40 \
  --kernel experiments/kda/audit_targets.py:fla_fused_recurrent_kda --json $RES/verify_fla_fused_recurrent_kda.json
cat $RES/stages.txt
