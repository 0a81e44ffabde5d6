# H200, session 13, branch evalfast (issue 17: evaluations per minute of a GPU evolve), carry [".whl"]; about 10.5
# minutes in all (setup ~20 s, bench_cold <= 50 s, evolve <= 590 s).
# Before this branch a clean-start CUDA-backend evolve evaluated ~11 candidates in ~8 minutes (~30-40 s each, one
# after another): s10 seed 3 8 in 376 s, s11 seed 4 5 in 293 s = 1.02/min (`python3 scripts/gpu_evolve.py --rate
# results/h200-2026-12-03/s11-calls/evolve4/evolve/run`). The branch assumed most of an evaluation was nvcc (sized on
# a 2-core CPU at 4 s a kernel); session 13's run measured 1.1 s a kernel on the H200's host, ~3 s saved of a 31 s
# evaluation (RESULTS.md, session 13): the expectations below did not hold. Where the compiles sit: the
# CUDA backend compiles one specialization per (dtype, static D) a gate calls, and the assign's battery calls
# D in {1, 3, 17, 33, 128} in bf16 and fp16 = 10 compiles (D=1031 is refused without one), in turn. The evolve now
# compiles each turn's queued candidates ahead, on the CPUs less 2 (14 nvcc at a time here, niced), while the GPU
# evaluates the one before; the evaluation itself (same gates, seeds, timing) finds them in the cubin cache.
# 1. bench_cold (~30-45 s): one evaluation's bf16 bench as it ran before this branch, cold (its own cubin and Triton
#    caches, no cached verdict): `cake bench` of the plain seed at cake_cell, the evaluator's reps and time guard.
#    $RES/bench_cold.json "stages_s": verify_bfloat16 (worker start + 5 cold nvcc + the gates), load, baselines
#    (Triton JIT of the baselines, cold), time_cake_cell (the interleaved timing). The fp16 gates an evaluation
#    also ran (5 more compiles) are not in it.
# 2. evolve (~570 s): clean-start offline evolve, seed 5, 6 evaluations a turn (a turn's ~60 compiles keep the
#    14-wide pool busy while the GPU works through the turn). Look for, in evolve.log the line "rate: ..." (copied to stages.txt) and
#    $RES/evolve/gpu_evolve.json "rate": evaluations_per_minute (expect ~4-6/min against 1.0-1.4 before),
#    evaluation_s_median (expect ~8-15 s against 30-40 s; it excludes compiles ahead), bench_stages_s_median
#    (each bench step with the compiles ahead: compare verify_bfloat16 with bench_cold's), outside_bench_stages_s_median
#    (worker starts and the fp16 gates), ahead.specializations (most
#    "built" ahead; "failed" ones must show as compile-error verdicts of those candidates), ahead.nvcc_s_median,
#    ahead.problems (should be empty); best_vs_time and summary.best: the best-so-far speedup (the hand-written
#    ping-pong is 1.09 ms at the cell). Also check the baselines' times in the evaluations (gpu_evolve.json
#    summary / the store's baseline_ms, ~1.13 ms for the best baseline before) are unchanged by the compiles
#    running beside the timing.
source scripts/gpu/lib.sh
stage bench_cold 50 env CAKE_CACHE_DIR=/tmp/bench_cold_cache TRITON_CACHE_DIR=/tmp/bench_cold_triton \
  cake bench --schedule experiments/kmeans/assign_plain.cake --backend cuda --shapes cake_cell --seed 5 --reps 100 \
  --max-seconds 20 --no-cache --baseline triton_assign --baseline flash_kmeans --baseline torch_mm \
  --json $RES/bench_cold.json
# MINUTES (default 9.5) shortens the evolve when the session's device time is short; the stage limit follows it
MINUTES=${MINUTES:-9.5}
stage evolve $(python3 -c "print(int($MINUTES * 60 + 20))") python3 scripts/gpu_evolve.py --minutes $MINUTES --backend cuda --evals-per-turn 6 --seed 5 --out $RES/evolve
grep "^rate:" $RES/evolve.log | tee -a $RES/stages.txt
pack
cat $RES/stages.txt
