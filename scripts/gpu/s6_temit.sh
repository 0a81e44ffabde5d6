# H200 session 6 (issue 17 item 4): the Triton emitter's plain assign against the hand-written Triton assign, three
# timed processes in one call so the headline carries an interval (session 5 ran two: 0.973x). Same config and cell
# as sessions 4-5 (BN=128 BK=128 4 warps 2 stages, cake_cell, bf16), each call also replayed from a CUDA graph.
# Expected runtime ~40 s (warm-up ~13 s, ~7 s per process); limit 100 s. Look for, at the end of the log:
#   cake_cell lowered_norms / hand_triton = R [lo, hi]: meets|misses the goal (>= 0.95)
source scripts/gpu/lib.sh
stage triton_vs_hand_s6 100 python3 scripts/gpu_triton_vs_hand.py --out "$RES/triton_vs_hand_s6" --processes 3 \
  --config 128,128,4,2 --shape cake_cell --graphs --warmup-timeout 45 --process-timeout 20
