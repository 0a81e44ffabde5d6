# H200, session 13 (issue 14): the staged KDA forward (experiments/kda/kda_fused_staged.cake: chunkpar with w, u,
# the state entering each chunk and vn rounded to the input dtype where the contract's chunked control and fla round
# them, so recur multiplies 16-bit operands once instead of three TF32 products, and the state update is one TF32
# product). Carry [".whl"]. Two calls on one warm machine, each under one shared budget:
#   bash scripts/gpu/s13_kda.sh a    (<= 540 s)
#   bash scripts/gpu/s13_kda.sh b    (<= 300 s; it reads a's pick and verdict from $RES, or from BEST= and VERDICT=
#                                     when the machine was released between the calls and a's results came back)
# Call a:
#   1. st_profile (<= 75 s; 4-6 variants took 21-31 s in sessions 6-9 plus compiles): ms of kernels per call at
#      h96_fixed, intra and recur apart (gpu_kda_profile.py --no-fla), the staged schedule's defaults and the
#      recur params its fewer registers reopen (BV 64, no register cap, 8 warps). Look for recur well under
#      chunkpar's 2.371 ms (session 8) and intra near its 3.378 ms (intra's arithmetic is unchanged; it writes
#      w and u in half the bytes).
#   2. cp_profile (<= 40 s): chunkpar's defaults in a process of their own, the reference for 1 on this machine.
#   3. st_pick (<= 5 s): the fastest staged variant as $RES/st_best.cake ("best at h96_fixed").
#   4. st_verify (<= 200 s; 87-105 s a dtype and two seeds cold in sessions 6-7): every kda_forward gate in bf16
#      under seeds 0, 1 and 2. Look for "kda_forward: PASSED"; a FAILED CMP-01/STREAM on `final_state` means the
#      staging rounds more than the contract allows (the CPU interpreter passed every gate in fp16, seed 0).
#   5. st_bench_h96 (what is left, <= 260 s): gpu_kda_bench.py against fla's chunk_kda (fused flags,
#      FLA_FLASH_KDA=0) at the three H = 96 shapes, interleaved, cold L2; it times the schedule only if 4 passed.
#      fla autotunes each new shape on its first call (84-98 s at H = 96 in sessions 7-8).
# Call b:
#   6. st_bench_h64 (<= 220 s): the same at the three H = 64 shapes.
#   7. st_verify_fp16 (what is left, <= 80 s): the gates in fp16 under seeds 0 and 1.
# Session 8's figures (chunkpar): h96 5.714 / 6.404 / 6.478 ms against fla 2.614 / 2.627 / 2.598; h64 4.167 / 4.768 /
# 4.806 against 1.771 / 1.806 / 1.751; geomean 0.405x of fla.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
SCHED=experiments/kda/kda_fused_staged.cake
BEST=${BEST:-$RES/st_best.cake}
VERDICT=${VERDICT:-$RES/verify_st.json}
case "${1:?call a or b}" in
a)
  budget 540
  budgeted st_profile 75 30 python3 scripts/gpu_kda_profile.py --out $RES/st_profile.json --schedule $SCHED \
    --shapes h96_fixed --no-fla --params '{}' '{"BV": 64}' '{"REGS_RECUR": 255}' '{"BV": 64, "REGS_RECUR": 255}' \
    '{"BV": 64, "WARPS_RECUR": 8, "REGS_RECUR": 255}' '{"REGS_RECUR": 128}'
  budgeted cp_profile 40 15 python3 scripts/gpu_kda_profile.py --out $RES/cp_profile.json \
    --schedule experiments/kda/kda_fused_chunkpar.cake --shapes h96_fixed --no-fla --params '{}'
  budgeted st_pick 5 2 python3 scripts/kda_best_variant.py $RES/st_profile.json --shape h96_fixed --write $BEST
  if [ ! -f "$BEST" ]; then echo "no ranking: the staged schedule's defaults" | tee -a "$RES/stages.txt"; cp $SCHED $BEST; fi
  budgeted st_verify 200 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 --schedule $BEST \
    --json $VERDICT
  budgeted st_bench_h96 260 60 python3 scripts/gpu_kda_bench.py --json $RES/st_bench_h96.json --schedule $BEST \
    --seed-verdict $VERDICT --shapes h96_fixed h96_varlen_mixed h96_varlen_1024x8 --max-seconds 110
  ;;
b)
  [ -f "$BEST" ] && [ -f "$VERDICT" ] || { echo "call a's pick $BEST or verdict $VERDICT is missing (a fresh machine?):
pass BEST= and VERDICT= from call a's results" >&2; exit 2; }
  budget 300
  budgeted st_bench_h64 220 60 python3 scripts/gpu_kda_bench.py --json $RES/st_bench_h64.json --schedule $BEST \
    --seed-verdict $VERDICT --shapes h64_fixed h64_varlen_mixed h64_varlen_1024x8 --max-seconds 90
  budgeted st_verify_fp16 80 40 cake verify --device cuda --timeout 60 --dtypes fp16 --seeds 0 1 --schedule $BEST \
    --json $RES/verify_st_fp16.json
  ;;
*) echo "call a or b" >&2; exit 2 ;;
esac
pack
cat $RES/stages.txt
