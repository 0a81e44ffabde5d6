# H200 session 4 (issue 18, items 2-3): the deterministic update against flash-kmeans at the five shapes with
# the memory floor, the Lloyd iteration against batch_kmeans_Euclid at the cell and fk_fp16, and the fp64
# Lloyd check of a whole run on the GPU. Needs experiments/kmeans/update_sorted.cake (branch `update`) merged:
# without it each stage stops at once with rc=2 and says so (nothing falls back to another update).
# Expected: ~4 + ~3 + ~1 min. Results under $RES/{update,lloyd,lloyd_check}/ (JSON + markdown + per-process samples).
source scripts/gpu/lib.sh
stage lloyd_update_bench 300 python3 scripts/gpu_update_bench.py --out $RES/update --processes 3
stage lloyd_pipeline_bench 240 python3 scripts/gpu_lloyd_bench.py --out $RES/lloyd --shapes cake_cell fk_fp16 --processes 3
stage lloyd_fp64_check 120 python3 scripts/gpu_lloyd_check.py --out $RES/lloyd_check --iterations 20
cat $RES/stages.txt
