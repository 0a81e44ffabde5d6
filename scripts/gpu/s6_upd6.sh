# H200 session 6, issue 18 (branch upd6): the update's per-shape choice, measured, gated and timed. 240 s at
# most (stage limits 45 + 50 + 10 + 40 + 95), ~185 s expected. Run from the repository root with carry
# [".whl"]. Every step's CPU path was rehearsed on the CPU (dry runs, the chooser on synthetic files).
# a. upd6_small (~35 s; call 1 took ~55 s for three variants at these two B=32 shapes): update_ranked at BN 256
#    (the new default) and BN 512 at cake_cell and fk_fp16, where 256 was never measured
#    (scripts/gpu_update_sorted.py --variants upd6_small: one process, interleaved with flash-kmeans and torch
#    index_add, cold L2; the default's launches profiled). Look at the `x flash-kmeans` column.
# b. upd6_large (~40 s; call 2 took 48 s for 4 variants x 3 shapes): the reduce's tiles at the large-cluster
#    shapes large_n and k128 (>= 512 points per cluster): BC 32/64/128 rows a step, RWARPS 2/8, RSTAGES 3/4,
#    BT 256; the default's launch profile at large_n at BN 256 (call 2 has it at BN 1024 only).
# c. upd6_choose (~5 s, CPU work): per bucket of experiments/kmeans/update_buckets.json, the variant with the
#    best worst-case flash-kmeans/ours over that bucket's measured shapes -> $RES/update_buckets.json. Commit it
#    as experiments/kmeans/update_buckets.json when e confirms it (if its small_clusters bucket picked BN 512,
#    make that update_ranked.cake's default and the bucket's params {}: the Lloyd pipeline runs the defaults,
#    and tests/lowering/test_update_choice.py holds the two together). Without a and b's files the committed
#    table is used.
# d. upd6_gates (~30 s; one dtype's verify took 17-19 s in session 5): every configuration of the chosen table
#    through every kmeans_update gate in bf16, fp16 and fp32 under seeds 0 and 1, six workers at once. Look for
#    "kmeans_update: PASSED" at the end of the log. On a failure e times the committed table instead (after its
#    own bf16/fp16 gates, ~35 s more).
# e. upd6_bench (~70 s; session 5's one-process run took 58 s with uncached gates): scripts/gpu_update_bench.py
#    with the chosen table at all five shapes, 3 timed processes after an untimed compile process (its gates are
#    d's cached verdicts). Look at `vs flash-kmeans [95%]`: the goal is a lower end >= 1.0 at every shape, and
#    at "runs" in $RES/upd6_bench/gpu_update_bench.json: which configuration each shape ran.
source scripts/gpu/lib.sh
stage upd6_small 45 python3 scripts/gpu_update_sorted.py --out $RES/upd6_small --variants upd6_small \
  --shapes cake_cell fk_fp16 --max-seconds 1
stage upd6_large 50 python3 scripts/gpu_update_sorted.py --out $RES/upd6_large --variants upd6_large \
  --shapes large_n k128 --max-seconds 1
stage upd6_choose 10 sh -c "python3 scripts/gpu_update_choose.py --out $RES/update_buckets.json \
  --measured $RES/upd6_small/*.json $RES/upd6_large/*.json"
TABLE=$RES/update_buckets.json; [ -f "$TABLE" ] || TABLE=experiments/kmeans/update_buckets.json
stage upd6_gates 40 python3 scripts/gpu_update_gates.py --table $TABLE --jobs 6 --timeout 40 \
  --out $RES/upd6_gates.json
# A chosen configuration that fails a gate is not timed: the bench then times the committed table (its own gates).
grep -q '"all_passed": true' $RES/upd6_gates.json 2>/dev/null || TABLE=experiments/kmeans/update_buckets.json
stage upd6_bench 95 python3 scripts/gpu_update_bench.py --out $RES/upd6_bench --table $TABLE --processes 3 \
  --reps 15 --max-seconds 1 --warmup-timeout 30 --process-timeout 30 --gate-timeout 40
cat $RES/stages.txt
