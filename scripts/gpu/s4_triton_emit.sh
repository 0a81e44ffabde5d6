# H200 session 4 (issue 17 item 4): CAKE's Triton lowering of the plain assign (assign_plain, and
# assign_plain_norms with ||c||^2 in a first launch) against the hand-written Triton assign at the hand-written
# kernel's sweep-best cell config (BN=128 BK=128 4 warps 2 stages), interleaved, cold L2, 3 timed processes after
# one compiling warm-up; each call also timed replayed from a CUDA graph (`@graph`: device time, host work out);
# registers / spills / shared memory and the PTX + TTGIR of every kernel.
# Expected runtime: ~1.5-2 minutes (warm-up <= 55 s, each timed process <= 40 s; the stage is cut at 180 s).
# Look for, at the end of triton_vs_hand.log:
#   cake_cell lowered_norms / hand_triton = R [lo, hi]: meets|misses the goal (>= 0.95)
#   cake_cell lowered_norms@graph / hand_triton@graph = R [lo, hi]: ...
# and the register table printed by the warm-up; $RES/triton_vs_hand/ holds vs_hand.{json,md}, resources.json,
# asm/ (PTX, TTGIR) and every process's samples.
source scripts/gpu/lib.sh
stage triton_vs_hand 180 python3 scripts/gpu_triton_vs_hand.py --out "$RES/triton_vs_hand" --processes 3 \
  --config 128,128,4,2 --shape cake_cell --graphs --warmup-timeout 55 --process-timeout 40
cat $RES/stages.txt
