# Issue 14, session 7 (kdaintra7): rank the KDA intra launch's variants on the H200, then verify the fastest.
# Session 6 (kda6_profile2): 8.34 ms of kernels per call at h96_fixed = intra 4.95 (255 registers, 4 warps, two
# programs an SM) + recur 3.39; fla chunk_kda 2.62 ms. Intra's SASS for sm_90a under Triton 3.6 (the H200's),
# counted on a CPU by scripts/aot_kda_sass.py --trips 4,4,4 (instructions one warp issues per program; BAR:
# block barriers; registers / spill bytes from cuobjdump):
#   params                                           regs spill  total  HMMA  BAR  LDS/STS MUFU  LDL/STL
#   {} (the default: BK 32, 3 stages, no cap)        255    24  22156  1056  143    2733   631      6
#   {"STAGES_INTRA": 1}                               255     0  14987  1056  107    1843   345      0
#   {"STAGES_INTRA": 1, "REGS_INTRA": 168}            168   160  14867  1056  107    1843   345    267
#   {"BK": 16, "STAGES_INTRA": 1, "REGS_INTRA": 168}  168    24  15801  1056  179    1847   345     10
#   {"BK": 16, "STAGES_INTRA": 1, "REGS_INTRA": 128}  128   104  16106  1056  179    1847   345    272
#   {"C": 16, "STAGES_INTRA": 1, "REGS_INTRA": 168}   168     0   6767   312   89     541   177      0
# (trips 4,4,4; BK 16: 8,4,8; C 16: 4,3,4, three doublings of Tm since this session where it ran four. C 16
# covers 16 rows a program, 24,576 more programs, and doubles recur's serial chunks: only the total ranks it.)
# 255 registers x 128 threads leave two programs an SM, 168 three, 128 four; shared memory is 40 KB a program
# in all six. Every variant computes the same values (register caps and num_stages change no operation; BK and C
# are domains the CPU gates cover).
# 120 s in all:
#   1. kdaintra7_profile (<= 65 s; 3 variants took 21 s in session 6, so about 45 s): per-launch device time of
#      ours only at h96_fixed for the six variants above. Look for each "ms of kernels per call" line and its
#      intra row (default: about 4.95 ms; the bet is BK 16 at 168 registers, three programs an SM) and the
#      regs/spills lines (ptxas on the H200 may differ from cuobjdump here by a few bytes: 4 vs 24 for the default).
#   2. kdaintra7_pick (<= 10 s): scripts/kda_best_variant.py ranks them and writes the fastest as
#      $RES/kda_best.cake (the schedule with the winner's params as its defaults). Look for "best at h96_fixed".
#   3. kdaintra7_verify (what is left, >= 25 s; 27 s warm in session 6, 105 s cold): the kda_forward gates in bf16
#      under seeds 0 and 1 on that file (the default schedule if stage 2 wrote none: said so in the log). Look for
#      "kda_forward: PASSED" under both seeds. A cold Triton cache may not finish in the time left: then the
#      ranking stands alone and the lead verifies the winner in a later call.
# Run from the repository root with carry [".whl"] (lark, fla-core 0.6.0, einops wheels, as s4_kda.sh).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
SCHED=experiments/kda/kda_fused_chunkpar.cake
budget 120  # `budgeted` (scripts/gpu/lib.sh): each stage under min(its cap, what is left of the 120 s)
budgeted kdaintra7_profile 65 20 python3 scripts/gpu_kda_profile.py --out $RES/kdaintra7_profile.json --schedule $SCHED \
  --shapes h96_fixed --no-fla --params '{}' '{"STAGES_INTRA": 1}' '{"STAGES_INTRA": 1, "REGS_INTRA": 168}' \
  '{"BK": 16, "STAGES_INTRA": 1, "REGS_INTRA": 168}' '{"BK": 16, "STAGES_INTRA": 1, "REGS_INTRA": 128}' \
  '{"C": 16, "STAGES_INTRA": 1, "REGS_INTRA": 168}'
budgeted kdaintra7_pick 10 3 python3 scripts/kda_best_variant.py $RES/kdaintra7_profile.json --shape h96_fixed \
  --write $RES/kda_best.cake
BEST=$RES/kda_best.cake
if [ ! -f "$BEST" ]; then echo "no ranking: verifying the default schedule" | tee -a "$RES/stages.txt"; BEST=$SCHED; fi
budgeted kdaintra7_verify 120 25 cake verify --device cuda --timeout 60 --dtypes bf16 --seeds 0 1 --schedule $BEST \
  --json $RES/verify_kdaintra7.json
cat $RES/stages.txt
