# H200, session 14 (issue 14): the staged KDA forward against fla chunk_kda at all six FlashKDA shapes, in three
# processes, with the varlen shapes' sequences side by side on side streams (experiments/kda/adapt.py), after a
# sweep of both launches' params. One pipeline of ~21 minutes: it outlives a call's 10-minute command, so it runs as
# its own process session and the calls after the first collect it (scripts/gpu/poll.sh). Carry [".whl"]:
#   call 1: RES=/tmp/res OUT=/tmp/s14out setsid nohup bash scripts/gpu/s14_kda.sh PASS > /tmp/s14.log 2>&1 < /dev/null &
#           sleep 5; bash scripts/gpu/poll.sh /tmp/res 560 /tmp/s14.log
#   call 2 and on, at once (the machine is let go 30 s after a call): bash scripts/gpu/poll.sh /tmp/res 570 /tmp/s14.log
# Two passes, each a pipeline on a machine of its own (`bash scripts/gpu/s14_kda.sh 1`, then `... 2`):
#   pass 1 (budget 1350 s), from session 13's defaults (BK 16, STAGES_RECUR 1): intra is 1.760 ms and recur
#     1.220 ms at h96_fixed. Unswept before: intra at 1 warp, intra's K slice 32/64 at 2 warps, intra's loops at
#     2 stages; recur's loop at 2 stages (now that w, u are 16-bit its buffers fit beside three programs an SM?),
#     recur at 2 warps or BV 16. Measured: BK 64 (intra 1.682) and STAGES_RECUR 2 (recur 0.899), the defaults since.
#   pass 2 (budget 760 s), around those: intra at BK 128 (no K loop), at 1 or 4 warps, capped at 168; recur at 3
#     stages, 8 warps, BV 16 / 64, capped at 128. fla autotunes again on the fresh machine (bench_1 ~390 s).
#     Measured: nothing beat the defaults; the six-shape bench 0.890x [0.885, 0.894] of fla (RESULTS.md, session 14).
# Stages:
#   1. sweep (<= 150 s): ms of kernels per call at h96_fixed, intra and recur apart (gpu_kda_profile.py), the
#      committed defaults and one param changed at a time per launch.
#   2. pick (<= 10 s): each launch's fastest params composed ($RES/best.cake; kda_best_variant.py --per-launch).
#      Chosen at h96_fixed: the one shape of six the choice is tuned to.
#   3. verify_bf16 (<= 160 s): every kda_forward gate in bf16 under seeds 0, 1, 2, on the picked file. The gates'
#      varlen cases run the sequences on side streams now (the wrapper's new path on a GPU).
#   4. verify_committed (<= 160 s): the committed defaults' gates, only when the picked file failed a gate (the
#      bench then times the committed schedule).
#   5. bench_1..3 (<= 450 s, then <= 260 s each): gpu_kda_bench.py at the six shapes, each in its own process
#      (fla autotunes each shape in the first; TRITON_CACHE_AUTOTUNING keeps that for the next two).
#   6. summary: the median over the three processes per shape with its range, and the geomean (kda_bench_summary.py).
#   7. verify_fp16 (what is left, <= 150 s): the gates in fp16 under seeds 0 and 1 (no GPU fp16 verdict yet).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
SCHED=experiments/kda/kda_fused_staged.cake
BEST=$RES/best.cake
case "${1:?pass 1 or 2}" in
1) budget 1350
   VARIANTS=('{"WARPS_INTRA": 1}' '{"WARPS_INTRA": 1, "BK": 32}' '{"BK": 32}' '{"BK": 64}' '{"STAGES_INTRA": 2}'
     '{"BK": 32, "STAGES_INTRA": 2}' '{"WARPS_INTRA": 4, "REGS_INTRA": 255}' '{"STAGES_RECUR": 2}'
     '{"STAGES_RECUR": 2, "REGS_RECUR": 255}' '{"WARPS_RECUR": 2}' '{"BV": 16}' '{"BV": 16, "WARPS_RECUR": 2}'
     '{"BV": 64, "REGS_RECUR": 255}') ;;
2) budget 760
   VARIANTS=('{"BK": 128}' '{"WARPS_INTRA": 4}' '{"WARPS_INTRA": 4, "BK": 128}' '{"WARPS_INTRA": 1}'
     '{"REGS_INTRA": 168}' '{"STAGES_RECUR": 3}' '{"WARPS_RECUR": 8}' '{"REGS_RECUR": 128}' '{"BV": 64}'
     '{"WARPS_RECUR": 8, "BV": 64}' '{"BV": 16}') ;;
*) echo "pass 1 or 2" >&2; exit 2 ;;
esac
budgeted sweep 150 30 python3 scripts/gpu_kda_profile.py --out $RES/sweep.json --schedule $SCHED \
  --shapes h96_fixed --no-fla --params '{}' "${VARIANTS[@]}"
budgeted pick 10 5 python3 scripts/kda_best_variant.py $RES/sweep.json --shape h96_fixed --per-launch --write $BEST
[ -f $BEST ] || { echo "no pick: the committed defaults" | tee -a "$RES/stages.txt"; cp $SCHED $BEST; }
budgeted verify_bf16 160 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 --schedule $BEST \
  --json $RES/verify_bf16.json
VERDICT=$RES/verify_bf16.json
passed() { python3 -c "import sys; sys.path.insert(0, 'scripts'); from pathlib import Path
from gpu_kda_bench import seed_verification; sys.exit(0 if seed_verification(Path('$1')).passed else 1)"; }
if ! passed $RES/verify_bf16.json; then
  echo "the picked file did not pass every gate: the committed defaults" | tee -a "$RES/stages.txt"
  cp $SCHED $BEST; VERDICT=$RES/verify_committed.json
  budgeted verify_committed 160 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 \
    --schedule $BEST --json $VERDICT
fi
kda_bench_processes 260 120 --schedule "$BEST" --seed-verdict "$VERDICT"
budgeted verify_fp16 150 60 cake verify --device cuda --timeout 90 --dtypes fp16 --seeds 0 1 --schedule $BEST \
  --json $RES/verify_fp16.json
touch $RES/DONE
pack
cat $RES/stages.txt
