# H200 session 4 (issue 17 item 4): CAKE's Triton lowering of the plain assign against the hand-written Triton
# assign at the hand-written kernel's sweep-best cell config (BN=128 BK=128 4 warps 2 stages), interleaved, cold
# L2, 3 processes after one compiling warm-up; registers / spills / shared memory and the PTX of every kernel.
# Expected: ~1.5 minutes (warm-up <= 60 s, each timed process <= 40 s). Look for, in triton_vs_hand.log,
#   cake_cell lowered_norms / hand_triton = R [lo, hi]: meets|misses the goal (>= 0.95)
# and the register table; $RES/triton_vs_hand/{vs_hand.json,vs_hand.md,resources.json,asm/} hold the data.
source scripts/gpu/lib.sh
stage triton_vs_hand 180 python3 scripts/gpu_triton_vs_hand.py --out "$RES/triton_vs_hand" --processes 3 \
  --config 128,128,4,2 --shape cake_cell
cat $RES/stages.txt
