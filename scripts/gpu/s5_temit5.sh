# H200 session 5 (issue 17 item 4, branch temit5): the Triton emitter's plain assign against the hand-written
# Triton assign again, after the emitter changes of this branch (argmin as two order-independent reductions
# with no NaN guard or index-comparing tie-break, pipelined loops at the launch's num_stages as plain `range`,
# DIV16 flags on the runtime dims). Same config and cell as session 4 (BN=128 BK=128 4 warps 2 stages,
# cake_cell, bf16), 2 timed processes after one compiling warm-up, each call also replayed from a CUDA graph.
# On a CPU with Triton 3.6 (the H200's), the sm_90a loop is 797 SASS instructions for lowered_norms against
# the hand-written kernel's 776 (1257 before; lowering/README.md): the stage checks that this is a time too.
# Expected runtime: ~30-45 s (session 4's three processes took 38 s: warm-up 13 s, 7 s per process; the
# DIV16 flags may add one compile to the warm-up). Limit 100 s: warm-up <= 45 s, each process <= 20 s.
# Look for, at the end of $RES/triton_vs_hand_s5.log:
#   cake_cell lowered_norms / hand_triton = R [lo, hi]: meets|misses the goal (>= 0.95)
#   cake_cell lowered_norms@graph / hand_triton@graph = R [lo, hi]: ...
#   (and lowered_plain, which still computes ||c||^2 per tile: the schedule's choice, not the emitter's)
# and the warm-up's register table (session 4: 255 lowered, 220 hand-written; the CPU compile gives 243 now).
# $RES/triton_vs_hand_s5/ holds vs_hand.{json,md}, resources.json, asm/ (PTX, TTGIR) and the samples.
source scripts/gpu/lib.sh
stage triton_vs_hand_s5 100 python3 scripts/gpu_triton_vs_hand.py --out "$RES/triton_vs_hand_s5" --processes 2 \
  --config 128,128,4,2 --shape cake_cell --graphs --warmup-timeout 45 --process-timeout 20
cat $RES/stages.txt
