# H200, a later session's call (issue 15: one launch for the exported ping-pong), carry [".whl"]; about 3.5 minutes.
# Session 8 measured the one-launch ping-pong (assign_pingpong_fused.cake) correct but 3x slower than the two-launch one
# (0.453x vs 1.411x of flash-kmeans): its ||c||^2 row sum was lowered a warp per centroid. CUDA codegen version 2 lowers
# it warp-transposed (32 centroids a warp, a 31-shuffle butterfly). Stages as s8_call1.sh's first three:
# 1. fused_variants: both files, 3 rounds, each against flash-kmeans in its own process; look for the "summary" lines.
#    If the fused interval reaches the two-launch one's, make it the exported assign (cake export's default source and
#    the Lloyd pipeline's assign step) and record both.
# 2. fused_verify: bf16 and fp16 under seeds 0 and 1 (the codegen changed: the old verdict does not carry over).
# 3. host9_*: host time of the exported one-launch op, three C++ processes (session 8: 8.1 us [6.3, 8.5]).
source scripts/gpu/lib.sh
budget 330
EXP=/tmp/s9_host9
rm -rf $EXP; mkdir -p $RES/host9
export CAKE_EXPORT_CACHE=/tmp/s9_host9_launcher
budgeted fused_variants 170 60 python3 scripts/gpu_assign_variants.py --out $RES/fused_variants --rounds 3 \
  --variants assign_pingpong.cake assign_pingpong_fused.cake
budgeted fused_verify 100 40 cake verify --schedule experiments/kmeans/assign_pingpong_fused.cake --backend cuda \
  --device cuda --dtypes bf16 fp16 --seeds 0 1 --json $RES/verify_fused.json
budgeted host9_export 15 10 cake export experiments/kmeans/assign_pingpong_fused.cake --backend cuda --arch sm_90a \
  --static D=128 --name cake_s9_host9 -o $EXP
budgeted host9_build_launcher 25 20 python3 -c "from cake.export.runtime import _launcher; print(_launcher.build())"
for i in 1 2 3; do
  budgeted host9_cpp_$i 10 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package $EXP \
    --label cpp_$i --out $RES/host9
done
budgeted host9_summary 14 8 python3 scripts/gpu_host_overhead.py --summarize $RES/host9/host_cpp_1.json \
  $RES/host9/host_cpp_2.json $RES/host9/host_cpp_3.json --out $RES/host9
pack
cat $RES/stages.txt
