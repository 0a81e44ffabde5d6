# H200, written in session 14 and not yet run (issue 14): the varlen-native KDA forward
# (experiments/kda/kda_fused_varlen.cake: kda_fused_staged's two launches, each one grid over every sequence, from
# tables the wrapper builds) against fla chunk_kda at the six FlashKDA shapes, three processes. The staged schedule
# launches a kernel pair per sequence on side streams and ran its varlen shapes 0.3-0.5 ms over the fixed shape of
# the same tokens (0.890x of fla over the six; 1.002x at h96_fixed, 0.817-0.889x varlen; RESULTS.md, session 14).
# Under the interpreter the varlen-native schedule is bit-identical to the staged one (tests/kda/
# test_kda_varlen_native.py). One pipeline of ~21 minutes, run and collected as scripts/gpu/s14_kda.sh's header
# says (RES=/tmp/res OUT=/tmp/s14out setsid nohup bash scripts/gpu/s14_varlen.sh ... &, then poll.sh). Carry [".whl"].
# Stages (one budget of 1300 s):
#   1. profile (<= 120 s): ms of kernels a call [intra, recur] of both schedules at h96_fixed, h96_varlen_mixed and
#      h96_varlen_1024x8 (the staged schedule's per-sequence kernels add up; the varlen-native one runs one pair).
#   2. verify_bf16 (<= 160 s): every kda_forward gate in bf16 under seeds 0, 1, 2 (the gates' varlen cases are
#      where the tables and the dead-row addressing are judged).
#   3. bench_1..3 (<= 450 s, then <= 260 s each): gpu_kda_bench.py at the six shapes, a process each.
#   4. summary: median over the processes per shape with its range, and the geomean (kda_bench_summary.py).
#   5. verify_fp16 (what is left, <= 150 s): the gates in fp16 under seeds 0 and 1.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
NATIVE=experiments/kda/kda_fused_varlen.cake
SHAPES="h96_fixed h96_varlen_mixed h96_varlen_1024x8 h64_fixed h64_varlen_mixed h64_varlen_1024x8"
budget 1300
budgeted profile 120 40 python3 scripts/gpu_kda_profile.py --out $RES/profile_native.json --schedule $NATIVE \
  --shapes h96_fixed h96_varlen_mixed h96_varlen_1024x8 --no-fla
budgeted profile_staged 60 30 python3 scripts/gpu_kda_profile.py --out $RES/profile_staged.json \
  --schedule experiments/kda/kda_fused_staged.cake --shapes h96_varlen_mixed h96_varlen_1024x8 --no-fla
budgeted verify_bf16 160 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 --schedule $NATIVE \
  --json $RES/verify_bf16.json
for i in 1 2 3; do
  cap=$([ $i = 1 ] && echo 450 || echo 260)
  # shellcheck disable=SC2086
  budgeted bench_$i $cap 120 python3 scripts/gpu_kda_bench.py --json $RES/bench_$i.json --schedule $NATIVE \
    --seed-verdict $RES/verify_bf16.json --shapes $SHAPES --max-seconds 110
done
budgeted summary 10 2 python3 scripts/kda_bench_summary.py $RES/bench_1.json $RES/bench_2.json $RES/bench_3.json \
  --json $RES/summary.json
budgeted verify_fp16 150 60 cake verify --device cuda --timeout 90 --dtypes fp16 --seeds 0 1 --schedule $NATIVE \
  --json $RES/verify_fp16.json
touch $RES/DONE
pack
cat $RES/stages.txt
