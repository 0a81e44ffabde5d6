# H200, session 13 (issue 14), after s13_kda.sh: intra's products as one TF32 product each instead of three.
# In the staged schedule every product intra computes ends in a value rounded to the input dtype (w and u are stored
# in E, P and the decayed queries are staged in E; A and Tm feed only w and u), so the 2^-11 of one TF32 product
# sits under the 2^-9 (bf16) rounding that follows it; the gates judge whether that holds (the CPU interpreter
# computes TF32 as fp32 and cannot show it). The variant is written here from the committed schedule by one
# substitution (`via dot.tf32x3` -> `via dot.tf32`, $RES/st_tf32.cake), so what was timed is on record. Carry
# [".whl"]; <= 420 s under one budget.
#   1. t_profile (<= 60 s): ms of kernels per call at h96_fixed, intra and recur apart, the variant at the staged
#      defaults and at the intra params its fewer registers reopen (BK 32, no cap: sm_90a under Triton 3.9 here
#      needs 135 registers at BK 16, no spill at the default cap of 128; 2 warps, chunkpar's best ungated profile
#      in session 9). Look for intra under
#      the staged schedule's 3.294 ms (s13_kda.sh, kda/st_profile.log).
#   2. t_pick (<= 5 s): the fastest as $RES/t_best.cake.
#   3. t_verify (<= 150 s): every kda_forward gate in bf16 under seeds 0, 1 and 2 ("kda_forward: PASSED ...").
#   4. t_bench (<= 200 s): gpu_kda_bench.py against fla chunk_kda at h96_fixed and h64_fixed, only if 3 passed
#      (staged: 0.580x and 0.544x; fla autotunes each shape on its first call).
#   5. t_verify_fp16 (what is left, <= 120 s; skip with SKIP_STAGES=t_verify_fp16): the gates in fp16, seeds 0 1.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
VARIANT=$RES/st_tf32.cake
sed 's/via dot\.tf32x3/via dot.tf32/g' experiments/kda/kda_fused_staged.cake > "$VARIANT"
grep -q 'via dot\.tf32x3' "$VARIANT" && { echo "the substitution left a tf32x3 product" >&2; exit 2; }
budget 420
budgeted t_profile 60 25 python3 scripts/gpu_kda_profile.py --out $RES/t_profile.json --schedule $VARIANT \
  --shapes h96_fixed --no-fla --params '{}' '{"BK": 32}' '{"REGS_INTRA": 168}' '{"BK": 32, "REGS_INTRA": 168}' \
  '{"WARPS_INTRA": 2, "REGS_INTRA": 255}'
budgeted t_pick 5 2 python3 scripts/kda_best_variant.py $RES/t_profile.json --shape h96_fixed --write $RES/t_best.cake
[ -f $RES/t_best.cake ] || { echo "no ranking: the variant's defaults" | tee -a "$RES/stages.txt"; cp $VARIANT $RES/t_best.cake; }
budgeted t_verify 150 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 --schedule $RES/t_best.cake \
  --json $RES/verify_t.json
budgeted t_bench 200 60 python3 scripts/gpu_kda_bench.py --json $RES/t_bench.json --schedule $RES/t_best.cake \
  --seed-verdict $RES/verify_t.json --shapes h96_fixed h64_fixed --max-seconds 100
budgeted t_verify_fp16 120 50 cake verify --device cuda --timeout 90 --dtypes fp16 --seeds 0 1 \
  --schedule $RES/t_best.cake --json $RES/verify_t_fp16.json
pack
cat $RES/stages.txt
