# H200 session 8, call 1 (issues 15, 14), carry [".whl"]; about 7-8 minutes (a shared budget of 570 s).
# 1. fused_variants (~100 s): the one-launch ping-pong (assign_pingpong_fused.cake: each consumer sums ||c||^2 of the
#    centroid tile it holds in shared memory) against the two-launch assign_pingpong.cake at the cell, each timed
#    against flash-kmeans in its own bench-worker process (gates first, bf16), 3 rounds interleaved
#    (scripts/gpu_assign_variants.py --rounds 3). Look for the "summary" lines: speedup over flash-kmeans, median
#    [min, max] over the rounds, for both files. The fused file replaces the two-launch one in export and the Lloyd
#    default only if its interval overlaps or beats the two-launch one's.
# 2. fused_verify (~60 s): cake verify of the fused schedule in bf16 and fp16 under seeds 0 and 1 (PASSED expected).
# 3. host8_* (~60 s): host time per call of the exported fused ping-pong's out-variant and functional op, three C++
#    processes (scripts/gpu_host_overhead.py, as s7_host7.sh measured the two-launch one: 8.8-11.5 us), plus its
#    summary; the graph column must read True/True and ids equal across processes.
# 4. kda8_profile (~70 s): recur's software pipelining (STAGES_RECUR 2, 3: never profiled), WARPS_RECUR 8 and intra at 2
#    warps, ms of kernels per call at h96_fixed (scripts/gpu_kda_profile.py --no-fla). A diagnosis, not a verdict.
# 5. kda_tolerances (what is left, <= 140 s): the KDA GPU tolerance table over seeds 0 1; commit
#    $RES/kda_tolerances_cuda.json as experiments/kda/tolerances_cuda.json if the stage exits 0.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
budget 570
EXP=/tmp/s8_host8
rm -rf $EXP; mkdir -p $RES/host8
export CAKE_EXPORT_CACHE=/tmp/s8_host8_launcher
budgeted fused_variants 170 60 python3 scripts/gpu_assign_variants.py --out $RES/fused_variants --rounds 3 \
  --variants assign_pingpong.cake assign_pingpong_fused.cake
budgeted fused_verify 100 40 cake verify --schedule experiments/kmeans/assign_pingpong_fused.cake --backend cuda \
  --device cuda --dtypes bf16 fp16 --seeds 0 1 --json $RES/verify_fused.json
budgeted host8_export 15 10 cake export experiments/kmeans/assign_pingpong_fused.cake --backend cuda --arch sm_90a \
  --static D=128 --name cake_s8_host8 -o $EXP
budgeted host8_build_launcher 25 20 python3 -c "import time; t = time.time(); from cake.export.runtime import _launcher; \
print(_launcher.build(), f'{time.time() - t:.1f} s')"
for i in 1 2 3; do
  budgeted host8_cpp_$i 10 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package $EXP \
    --label cpp_$i --out $RES/host8
done
budgeted host8_summary 14 8 python3 scripts/gpu_host_overhead.py --summarize $RES/host8/host_cpp_1.json \
  $RES/host8/host_cpp_2.json $RES/host8/host_cpp_3.json --out $RES/host8
budgeted kda8_profile 90 45 python3 scripts/gpu_kda_profile.py --out $RES/kda8_profile.json \
  --schedule experiments/kda/kda_fused_chunkpar.cake --shapes h96_fixed --no-fla --params '{}' \
  '{"STAGES_RECUR": 2}' '{"STAGES_RECUR": 3}' '{"STAGES_RECUR": 2, "REGS_RECUR": 255}' \
  '{"WARPS_RECUR": 8, "REGS_RECUR": 255}' '{"WARPS_INTRA": 2}' '{"WARPS_INTRA": 2, "REGS_INTRA": 255}'
budgeted kda_tolerances 140 60 sh -c "python3 -m cake.verifier.calibrate --device cuda --op kda_forward --seeds 0 1; rc=\$?;
  cp experiments/kda/tolerances_cuda.json $RES/kda_tolerances_cuda.json; exit \$rc"
pack
cat $RES/stages.txt
