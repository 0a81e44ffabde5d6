# H200, session 7's second call (issue 14), with carry [".whl", ".flashkda"]; about 7.5 minutes (budget 450 s).
# 1. kda7_verify (<= 115 s; 101 s cold in session 6): every kda_forward gate in bf16 under seeds 0 and 1 on
#    kda_fused_chunkpar.cake at its new defaults (BK 16, STAGES_INTRA 1, REGS_INTRA 128: the fastest of six at
#    h96_fixed in call 1, whose verify stage ran out compiling). Look for "kda_forward: PASSED" under both seeds.
# 2. scripts/gpu/s7_fkda7.sh (what is left, its own 300 s budget capped by ours): FlashKDA built from source, smoke,
#    gated, and timed beside fla chunk_kda and (given stage 1's passing verdict) our seed at the six FlashKDA shapes.
# (Session 6's s7_call2.sh — evolve seed, Lloyd at BN 256, KDA tolerance table — gave way to these and to the update
# fix; the Lloyd figure is re-measured after it.)
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage kda7_verify 115 cake verify --device cuda --timeout 100 --dtypes bf16 --seeds 0 1 \
  --schedule experiments/kda/kda_fused_chunkpar.cake --json $RES/verify_kda7.json
grep -q '"passed": true' $RES/verify_kda7.json 2>/dev/null && export FKDA7_SEED_VERDICT=$RES/verify_kda7.json
source scripts/gpu/s7_fkda7.sh
