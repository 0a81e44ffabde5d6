# H200, session 7's first call (issues 18, 17, 14), with carry [".whl"]; about 8.5 minutes (stage limits sum to 510 s).
# 1. upd7_bd (~45 s): update_ranked's reduce column split BD (new, never timed) and the session-6 large-bucket
#    winner at large_n and k128, the two shapes issue 18 still misses (session 6, 3 processes: 0.940x, 1.036x).
# 2. upd7_choose (~5 s): the bucket table from this call's large-cluster sweep and session 6's small-cluster sweep.
# 3. upd7_gates (~60-120 s; session 6's 40 s ran out): every configuration of the chosen table, all gates, bf16/fp16/
#    fp32, seeds 0 1. Commit $RES/update_buckets.json as experiments/kmeans/update_buckets.json only if it passes
#    here AND the bench below shows it.
# 4. upd7_bench (~90 s): the chosen (or, on a gate failure, the committed) table at five shapes, 3 processes.
# 5. cost6_warps8 (~45 s): the cost model's stated out-of-sample test (24 CUDA variants, WARPS 4 vs 8; prediction:
#    WARPS=8 takes 0.58-0.91x of WARPS=4 at the same BN/BK). Then, on a CPU: scripts/fit_cost_model.py and
#    scripts/cost_residuals.py over $RES/cost6/costdata/runs/*.
# 6. kdaintra7 stages, if that file exists (<= 120 s).
source scripts/gpu/lib.sh
stage upd7_bd 60 python3 scripts/gpu_update_sorted.py --out $RES/upd7_bd --variants bd --shapes large_n k128 \
  --max-seconds 1
stage upd7_choose 10 sh -c "python3 scripts/gpu_update_choose.py --out $RES/update_buckets.json \
  --measured results/h200-2026-12-02/s6-calls3-8/upd6_small/*.json $RES/upd7_bd/*.json"
TABLE=$RES/update_buckets.json; [ -f "$TABLE" ] || TABLE=experiments/kmeans/update_buckets.json
stage upd7_gates 150 python3 scripts/gpu_update_gates.py --table $TABLE --jobs 6 --timeout 140 \
  --out $RES/upd7_gates.json
grep -q '"all_passed": true' $RES/upd7_gates.json 2>/dev/null || TABLE=experiments/kmeans/update_buckets.json
stage upd7_bench 110 python3 scripts/gpu_update_bench.py --out $RES/upd7_bench --table $TABLE --processes 3 \
  --reps 15 --max-seconds 1 --warmup-timeout 30 --process-timeout 30 --gate-timeout 60
source scripts/gpu/s6_cost6.sh
[ -f scripts/gpu/s7_kdaintra7.sh ] && source scripts/gpu/s7_kdaintra7.sh
cat $RES/stages.txt
