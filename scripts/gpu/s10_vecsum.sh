# H200 session 10 (branch vecsum), carry [".whl"]; about 4 minutes, one 280 s budget.
# CUDA codegen version 4: a row sum of one 16-bit shared tile (||c||^2 of a `cs` stage) is now one row per lane —
# lane l walks centroid row l in 16-byte chunks (ld.shared.v4 at the chunk's swizzled offset, 16 a row at D = 128,
# conflict-free) with no butterfly, where version 2 did 128 2-byte loads a lane and a 31-shuffle butterfly.
# 1. variants (~120 s): assign_pingpong.cake (two launches, ||c||^2 from global memory: code unchanged, the
#    reference), assign_pingpong_prodnorm.cake (the producer warpgroup sums ||c||^2) and assign_pingpong_fused.cake
#    (both consumers sum it beside their argmin), 3 rounds, each in its own process against the flash-kmeans timed
#    in that process. Look for the "summary" lines in variants.log: median [min, max] speedups over flash-kmeans.
#    Before (version 2): fused 0.81x (s9_call1), prodnorm not yet timed (s10_call1.sh times it), two-launch ~1.41x.
#    The question: does prodnorm and/or fused now reach the two-launch interval?
# 2. verify_prodnorm, verify_fused (~25 s each): the contract gates in bf16 and fp16, seeds 0 and 1 (D varies over
#    8..128 and 1, 3, 17, 33: D a multiple of 8 takes the new form, the others keep the butterfly). Look for
#    "PASSED" in the logs and "passed": true in verify_prodnorm.json / verify_fused.json.
# 3. verify_plain (~20 s, only if time is left): assign_plain.cake's staged centroid tile takes the new form too.
source scripts/gpu/lib.sh
budget 280
budgeted variants 170 60 python3 scripts/gpu_assign_variants.py --out $RES/variants --rounds 3 \
  --variants assign_pingpong.cake assign_pingpong_prodnorm.cake assign_pingpong_fused.cake
budgeted verify_prodnorm 60 20 cake verify --schedule experiments/kmeans/assign_pingpong_prodnorm.cake --backend cuda \
  --device cuda --dtypes bf16 fp16 --seeds 0 1 --json $RES/verify_prodnorm.json
budgeted verify_fused 60 20 cake verify --schedule experiments/kmeans/assign_pingpong_fused.cake --backend cuda \
  --device cuda --dtypes bf16 fp16 --seeds 0 1 --json $RES/verify_fused.json
budgeted verify_plain 40 20 cake verify --schedule experiments/kmeans/assign_plain.cake --backend cuda \
  --device cuda --dtypes bf16 fp16 --seeds 0 --json $RES/verify_plain.json
pack
cat $RES/stages.txt
