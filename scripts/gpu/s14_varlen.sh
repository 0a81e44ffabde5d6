# H200, written in session 14 and not yet run (issue 14): the varlen-native KDA forward
# (experiments/kda/kda_fused_varlen.cake: kda_fused_staged's two launches, each one grid over every sequence, from
# tables the wrapper builds) against fla chunk_kda at the six FlashKDA shapes, three processes. The staged schedule
# launches a kernel pair per sequence on side streams and ran its varlen shapes 0.3-0.5 ms over the fixed shape of
# the same tokens (0.890x of fla over the six; 1.002x at h96_fixed, 0.817-0.889x varlen; RESULTS.md, session 14).
# Under the interpreter the varlen-native schedule is bit-identical to the staged one (tests/kda/
# test_kda_varlen_native.py). One pipeline of ~21 minutes, run and collected as scripts/gpu/s14_kda.sh's header
# says (RES=/tmp/res OUT=/tmp/s14out setsid nohup bash scripts/gpu/s14_varlen.sh ... &, then poll.sh). Carry [".whl"].
# Also its kl16 variant (scripts/kda_kl16_variant.sh: the decayed keys stored in the input dtype, as fla stores its
# `kg`, and the state update one 16-bit product; the interpreter's fp16 gates pass it), timed only if its bf16 gates
# pass. The staged schedule is timed beside them under its session-14 verdict (results/.../s14-calls/pass2).
# Stages (one budget of 1500 s):
#   1. profile, profile_kl16 (<= 80 s each): ms of kernels a call [intra, recur] at h96_fixed, h96_varlen_mixed and
#      h96_varlen_1024x8 (the staged schedule's per-sequence kernels add up to ~2.58 ms at each, session 14).
#   1a. profile_split (<= 90 s): kda_fused_varlen_split.cake (intra split in two launches, Tm handed on) at
#      h96_fixed, the WY launch at 2, 4 and 8 warps and capped at 168: intra + wy against the one-launch intra.
#      Only a profile: if it wins, the next session gates and benches it.
#   1a'. profile_h64 (<= 60 s): the varlen-native schedule at h64_fixed with recur at BV 32 (256 programs: two
#      thirds of the H200's 396 slots at three an SM) and BV 16 (512; 2 or 4 warps): whether H = 64 wants its own
#      recur tile (h64_fixed ran 0.939x against h96_fixed's 1.002x).
#   1b. profile_fla (<= 150 s): the same beside fla chunk_kda's kernels at h96_fixed — which of fla's kernels does
#      the work of our intra (1.685 ms) and recur (0.895 ms) there, and in how long (never recorded before). fla
#      autotunes here; bench_1 reuses it (TRITON_CACHE_AUTOTUNING).
#   2. verify_bf16, verify_kl16 (<= 160 s each): every kda_forward gate in bf16 under seeds 0, 1, 2 (the gates'
#      varlen cases are where the tables and the dead-row addressing are judged).
#   3. bench_1..3 (<= 450 s, then <= 200 s each): gpu_kda_bench.py at the six shapes, a process each, the staged,
#      varlen-native (and kl16) schedules side by side against the same fla calls.
#   4. summary: per schedule, the median over the processes per shape with its range, and the geomean.
#   5. verify_fp16 (what is left, <= 150 s): the varlen-native gates in fp16 under seeds 0 and 1.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
STAGED=experiments/kda/kda_fused_staged.cake
STAGED_VERDICT=results/h200-2026-12-03/s14-calls/pass2/verify_bf16.json
NATIVE=experiments/kda/kda_fused_varlen.cake
KL16=$RES/kda_fused_varlen_kl16.cake
bash scripts/kda_kl16_variant.sh $NATIVE > $KL16 || { echo "no kl16 variant" | tee -a "$RES/stages.txt"; rm -f $KL16; }
budget 1500
budgeted profile 80 40 python3 scripts/gpu_kda_profile.py --out $RES/profile_native.json --schedule $NATIVE \
  --shapes h96_fixed h96_varlen_mixed h96_varlen_1024x8 --no-fla
budgeted profile_kl16 80 40 python3 scripts/gpu_kda_profile.py --out $RES/profile_kl16.json --schedule $KL16 \
  --shapes h96_fixed h96_varlen_mixed h96_varlen_1024x8 --no-fla
budgeted profile_split 90 40 python3 scripts/gpu_kda_profile.py --out $RES/profile_split.json \
  --schedule experiments/kda/kda_fused_varlen_split.cake --shapes h96_fixed --no-fla \
  --params '{}' '{"WARPS_WY": 2}' '{"WARPS_WY": 8}' '{"REGS_WY": 168}'
budgeted profile_h64 60 30 python3 scripts/gpu_kda_profile.py --out $RES/profile_h64.json --schedule $NATIVE \
  --shapes h64_fixed --no-fla --params '{}' '{"BV": 16}' '{"BV": 16, "WARPS_RECUR": 2}'
budgeted profile_fla 150 100 python3 scripts/gpu_kda_profile.py --out $RES/profile_fla.json --schedule $NATIVE \
  --shapes h96_fixed
budgeted verify_bf16 160 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 --schedule $NATIVE \
  --json $RES/verify_bf16.json
budgeted verify_kl16 160 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 --schedule $KL16 \
  --json $RES/verify_kl16.json
SCHEDULES=("$STAGED" "$NATIVE"); VERDICTS=("$STAGED_VERDICT" "$RES/verify_bf16.json")
if python3 -c "import sys; sys.path.insert(0, 'scripts'); from pathlib import Path
from gpu_kda_bench import seed_verification; sys.exit(0 if seed_verification(Path('$RES/verify_kl16.json')).passed else 1)"; then
  SCHEDULES+=("$KL16"); VERDICTS+=("$RES/verify_kl16.json")
else
  echo "kl16 did not pass every bf16 gate (or was not verified): not timed" | tee -a "$RES/stages.txt"
fi
kda_bench_processes 200 100 --schedule "${SCHEDULES[@]}" --seed-verdict "${VERDICTS[@]}"
budgeted verify_fp16 150 60 cake verify --device cuda --timeout 90 --dtypes fp16 --seeds 0 1 --schedule $NATIVE \
  --json $RES/verify_fp16.json
touch $RES/DONE
pack
cat $RES/stages.txt
