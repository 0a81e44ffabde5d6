# H200, written in session 15 (issue 14), run in session 16 (results/h200-2026-12-03/s16-kda; its evolve found the
# fitness-shapes bug, scripts/gpu/s17_kda.sh has what is left): the kl16 forms of both KDA forwards side by side against fla
# chunk_kda at the six FlashKDA shapes in three processes, then `cake evolve --op kda` on the GPU with measured
# fitness. One pipeline of ~25 minutes, run and collected as scripts/gpu/s14_kda.sh's header says:
#   RES=/tmp/res OUT=/tmp/s16out setsid nohup bash scripts/gpu/s16_kda.sh > /tmp/s16.log 2>&1 < /dev/null &
#   sleep 5; bash scripts/gpu/poll.sh /tmp/res 560 /tmp/s16.log      (then poll.sh again at once). Carry [".whl"].
# Session 15 measured the kl16 variant of the varlen-native schedule at 1.034x [1.032, 1.034] of fla over the six
# shapes (intra 1.752 ms, recur 0.749 at h96_fixed), the staged schedule at 0.982x — its intra 1.685 ms against
# the varlen-native's 1.891, its varlen shapes slower (a launch pair per sequence). The staged schedule's kl16
# variant (scripts/kda_kl16_variant.sh) was never built on the GPU: if its intra keeps the staged lead and recur
# gains what kl16 gave the varlen-native one, it would run ~2.3 ms at h96_fixed.
# Stages (one budget of 1560 s, S16_BUDGET overrides):
#   0. profile (<= 60 s): the staged kl16 schedule's ms of kernels a call [intra, recur] at h96_fixed and h64_fixed.
#   1. verify_staged_kl16, verify_varlen_kl16 (<= 160 s each): every kda_forward gate in bf16 under seeds 0, 1, 2
#      (the verdict files now name the schedule's sha256: the bench refuses a verdict of another file).
#   2. bench_1..3 (<= 450 s, then <= 200 s each): gpu_kda_bench.py at the six shapes, a process each, both kl16
#      schedules side by side against the same fla calls; summary: per schedule the median over processes.
#   3. kda_evolve (<= 600 s, 480 s of wall time): `cake evolve --op kda --device cuda --against fla_chunk_kda` from the workload's seeds
#      (FlashKDA is not installed: it fails the contract's fp32 final_state, and the run would refuse to start
#      without --against), then `cake report` of the run.
#   4. verify_fp16 (what is left, <= 150 s each): both kl16 schedules' gates in fp16 under seeds 0 and 1.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
STAGED_KL16=$RES/kda_fused_staged_kl16.cake
VARLEN_KL16=$RES/kda_fused_varlen_kl16.cake
bash scripts/kda_kl16_variant.sh experiments/kda/kda_fused_staged.cake > $STAGED_KL16
bash scripts/kda_kl16_variant.sh experiments/kda/kda_fused_varlen.cake > $VARLEN_KL16
budget ${S16_BUDGET:-1560}
budgeted profile 60 20 python3 scripts/gpu_kda_profile.py --out $RES/profile_kl16.json --schedule $STAGED_KL16 \
  --shapes h96_fixed h64_fixed --no-fla
budgeted verify_staged_kl16 160 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 \
  --schedule $STAGED_KL16 --json $RES/verify_staged_kl16.json
budgeted verify_varlen_kl16 160 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 \
  --schedule $VARLEN_KL16 --json $RES/verify_varlen_kl16.json
kda_bench_processes 200 100 --schedule "$STAGED_KL16" "$VARLEN_KL16" \
  --seed-verdict "$RES/verify_staged_kl16.json" "$RES/verify_varlen_kl16.json"
budgeted kda_evolve 600 300 cake evolve --op kda --device cuda --backend triton --seed 0 --evals-per-turn 2 \
  --against fla_chunk_kda --wall-time 480 --out $RES/kda_evolve
budgeted report 20 5 cake report $RES/kda_evolve
budgeted verify_fp16_varlen 150 60 cake verify --device cuda --timeout 90 --dtypes fp16 --seeds 0 1 \
  --schedule $VARLEN_KL16 --json $RES/verify_fp16_varlen_kl16.json
budgeted verify_fp16_staged 150 60 cake verify --device cuda --timeout 90 --dtypes fp16 --seeds 0 1 \
  --schedule $STAGED_KL16 --json $RES/verify_fp16_staged_kl16.json
touch $RES/DONE
pack
cat $RES/stages.txt
