# H200 session 5, call 3 (issues 18, 17): the new default update (update_ranked.cake: gates in fp16/bf16 under
# seeds 0 1, all five shapes against flash-kmeans, launch profile), the CUDA WARPS=8 fix re-checked on the
# variants that computed wrong ids in call 1, and the Triton emitter's assign against the hand-written one.
# Each stage file is self-contained (scripts/gpu/s5_{upd5,warps5,temit5}.sh); they share $RES.
export RES=${RES:-/tmp/res}
bash scripts/gpu/s5_warps5.sh
bash scripts/gpu/s5_upd5.sh
bash scripts/gpu/s5_temit5.sh
