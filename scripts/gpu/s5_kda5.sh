# Issue 14, session 5 (kda5): the chunk-parallel KDA schedule after `via dot.tf32x3` (its fp32 products on the tensor
# cores instead of spilling IEEE FMA dots: recur was 60.6 of 67.4 ms at h96_fixed) — verdict first, then timing.
#   1. kda5_verify (<= 100 s): the kda_forward gates in bf16 under seeds 0 and 1 (s4-call5 took 98 s for the
#      same two seeds with the old schedule, most of it host-side references). Look for "PASSED" per seed in the
#      log; verify_kda5.json is what the bench reads.
#   2. kda5_bench (<= 110 s): fla chunk_kda (fused flags) vs the schedule at FlashKDA's six shapes, interleaved,
#      cold L2; each shape's first call (compiles, fla's autotuning) is outside its 15 s guard. Look for one
#      line per contestant and shape, and the last line's geomean speedup (the issue's goal: >= 1.0x).
#   3. kda5_profile (<= 20 s, Triton's disk cache holds the compiles from stage 2): per-launch device time at
#      h96_fixed (intra / recur / output / fills) and each kernel's registers and spills; no fla.
# Run from the repository root with carry [".whl"] (lark, fla-core 0.6.0, einops wheels, as s4_kda.sh). Total 230 s.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
SCHED=experiments/kda/kda_fused_chunkpar.cake
stage kda5_verify 120 cake verify --device cuda --timeout 110 --dtypes bf16 --seeds 0 1 --schedule $SCHED \
  --json $RES/verify_kda5.json
stage kda5_bench 110 python3 scripts/gpu_kda_bench.py --json $RES/kda5_bench.json --schedule $SCHED \
  --seed-verdict $RES/verify_kda5.json --max-seconds 15
stage kda5_profile 20 python3 scripts/gpu_kda_profile.py --out $RES/kda5_profile.json --schedule $SCHED \
  --shapes h96_fixed --no-fla
cat $RES/stages.txt
