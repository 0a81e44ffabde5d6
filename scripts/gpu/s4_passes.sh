# H200 session 4 (issues 17 and 12, branch passes): points of the warp-specialized family the IR passes build
# from the plain seed (CONSUMERS 2/3/4, producer/consumer register splits, stages, the norm launch's warps),
# beside the hand-written assign_pingpong.cake, each through the bf16 gates and timed interleaved with
# flash-kmeans at the CAKE cell (scripts/gpu_passes.py). Expected: about 8 bench workers x 15-25 s = 2-3.5 min.
# Look for: every point `timed` (none `fail`/`timeout`: the passes' output runs correctly on the hardware),
# and whether any point with CONSUMERS 3 or 4 beats the hand-written row's ms.
source scripts/gpu/lib.sh
stage passes_points 300 python3 scripts/gpu_passes.py --out $RES/passes --max-seconds 2
cat $RES/stages.txt
