# H200, session 7's third call (issues 18, 15, 14), with carry [".whl"]; about 8.5 minutes (stage limits 230 + 130 +
# 113 + 45 = 518 s). In the order the issues can close:
# 1. scripts/gpu/s7_upd7.sh (230 s): the update's Triton call plans — gates, host vs GPU time per call with plans
#    off/on beside flash-kmeans, the five-shape bench over 3 processes (its header says what to look for).
# 2. lloyd (<= 130 s): the Lloyd iteration at the cell with the update's default (BN 256, call plans), against
#    batch_kmeans_Euclid, 3 processes (session 6's 1.522x [1.488, 1.642] ran BN 1024 without plans).
# 3. scripts/gpu/s7_host7.sh (113 s): host time per call of the exported ping-pong, the out-variant beside the
#    functional op, 3 processes (its header says what to look for; goal <= 10 us).
# 4. kda7_recur (<= 45 s): recur's register cap REGS_RECUR (168: three programs an SM, one wave of h96_fixed's 384)
#    and BV 64 against the defaults, ms of kernels per call at h96_fixed (scripts/gpu_kda_profile.py --no-fla).
#    Look for each "ms of kernels per call" and the recur rows; a faster variant needs a GPU verdict before it
#    becomes the default.
source scripts/gpu/s7_upd7.sh
stage lloyd 130 python3 scripts/gpu_lloyd_bench.py --out $RES/lloyd --shapes cake_cell --processes 3
source scripts/gpu/s7_host7.sh
export FLA_FLASH_KDA=0
stage kda7_recur 45 python3 scripts/gpu_kda_profile.py --out $RES/kda7_recur.json \
  --schedule experiments/kda/kda_fused_chunkpar.cake --shapes h96_fixed --no-fla --params '{}' \
  '{"REGS_RECUR": 168}' '{"REGS_RECUR": 128}' '{"BV": 64}'
cat $RES/stages.txt
