# H200, session 9 (issue 14, helper kda64): KDA forward at chunk 64 (experiments/kda/kda_fused_chunk64.cake), which
# halves recur's serial chain (128 dependent chunks at T = 8192 instead of chunkpar's 256) at the price of more work
# in intra (A's and P's products per block of SUB rows, Tm over 64 rows). Carry [".whl", ".flashkda"]; about 4.5
# minutes: stage caps 60 + 5 + 95 + 110 = 270 s under one shared budget of 270 s.
#   1. k64_profile (<= 60 s; 3-6 variants took 21-31 s in sessions 6-7): ms of kernels per call at h96_fixed, intra
#      and recur apart (scripts/gpu_kda_profile.py --no-fla), for four variants chosen from the sm_90a compile on a
#      CPU (the table in the schedule's header):
#        {}                                           SUB 16, both launches 4 warps uncapped (two programs an SM)
#        {"SUB": 32}                                  a quarter fewer intra instructions (two block-rows, not four)
#        {"SUB": 32, "REGS_INTRA": 168}               intra at three programs an SM (spills: 1,180 instructions a
#                                                     program under Triton 3.9; chunkpar's cap spilled less on the
#                                                     H200's Triton 3.6 than here, 26 bytes against 176)
#        {"SUB": 32, "WARPS_RECUR": 8, "REGS_RECUR": 128}   recur at 8 warps, still two programs an SM
#      Look for each variant's "ms of kernels per call" and its intra / recur rows against chunkpar's defaults as
#      session 8 measured them: 5.752 ms [intra 3.378, recur 2.371]. The bet is recur well under 2.37 ms; intra
#      issues about as many instructions a token as chunkpar's (SUB 32) or a quarter more (SUB 16) at half the
#      programs an SM, so it may well grow.
#   2. k64_pick (<= 5 s): scripts/kda_best_variant.py writes the fastest variant as $RES/k64_best.cake (its params as
#      the defaults, checked). Look for "best at h96_fixed".
#   3. k64_verify (<= 95 s; chunkpar took 27 s warm, 87-105 s cold in sessions 6-7): every kda_forward gate in bf16
#      under seeds 0 and 1 on that file (the schedule's own defaults if stage 2 wrote none: said so in stages.txt).
#      Look for "kda_forward: PASSED" (both seeds); the CPU interpreter passed every gate in fp32 and fp16.
#   4. k64_bench (what is left, <= 110 s): scripts/gpu_kda_bench.py, the winner against fla's chunk_kda (fused flags)
#      at h96_fixed, then h64_fixed; it times the schedule only if stage 3 passed. fla autotunes each new shape
#      (its first call took 51 s at h64_fixed in session 8): on a cold machine h64_fixed may be cut by the stage
#      limit, and the JSON keeps h96_fixed (with TRITON_CACHE_AUTOTUNING=1 a machine warm from s9_kda.sh's fla
#      stages has both in time). Look for the "speedup" lines (chunkpar: 0.405x at h96_fixed against fla's 2.61 ms,
#      0.298x at h64_fixed against 1.77 ms); at h64_fixed recur's 256 programs fit one wave.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
SCHED=experiments/kda/kda_fused_chunk64.cake
budget 270
budgeted k64_profile 60 20 python3 scripts/gpu_kda_profile.py --out $RES/k64_profile.json --schedule $SCHED \
  --shapes h96_fixed --no-fla --params '{}' '{"SUB": 32}' '{"SUB": 32, "REGS_INTRA": 168}' \
  '{"SUB": 32, "WARPS_RECUR": 8, "REGS_RECUR": 128}'
budgeted k64_pick 5 2 python3 scripts/kda_best_variant.py $RES/k64_profile.json --shape h96_fixed \
  --write $RES/k64_best.cake
BEST=$RES/k64_best.cake
if [ ! -f "$BEST" ]; then echo "no ranking: the chunk-64 schedule's defaults" | tee -a "$RES/stages.txt"; BEST=$SCHED; fi
budgeted k64_verify 95 25 cake verify --device cuda --timeout 60 --dtypes bf16 --seeds 0 1 --schedule $BEST \
  --json $RES/verify_k64.json
budgeted k64_bench 110 30 python3 scripts/gpu_kda_bench.py --json $RES/k64_bench.json --schedule $BEST \
  --seed-verdict $RES/verify_k64.json --shapes h96_fixed h64_fixed --max-seconds 100
pack
cat $RES/stages.txt
