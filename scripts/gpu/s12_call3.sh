# H200 session 12, call 3 (issue 15), carry [".whl"]; about 3 minutes, one 200 s budget.
# Where do the fused ping-pong's extra ~17 us go (call 1: 1.138-1.148 ms against 1.115-1.130 ms for two launches)?
# Four variants, 3 rounds, each in its own process against flash-kmeans (gpu_assign_variants.py):
#   assign_pingpong.cake          two launches, 64-row norm blocks on 4 warps
#   assign_pingpong_coop.cake     fused, 256-row norm blocks on 8 warps (one block per CTA at the cell)
#   coop_unfused                  assign_pingpong_coop.cake without its `fuse` line: two launches, 256-row blocks
#                                 (the norm launch's shape alone)
#   coop64                        fused, with assign_pingpong.cake's 64-row, 4-warp norm blocks (the fusion alone)
# The two derived files are written here by sed. Look for: compare.txt (median [min, max] over flash-kmeans and the
# median time of each variant).
source scripts/gpu/lib.sh
budget 200
K=experiments/kmeans
grep -v '^fuse centroid_norms into assign' $K/assign_pingpong_coop.cake \
  | sed 's/^schedule assign_pingpong_coop /schedule assign_pingpong_coop_unfused /' > $K/assign_pingpong_coop_unfused.cake
sed -e 's/^schedule assign_pingpong_coop /schedule assign_pingpong_coop64 /' -e 's/cdiv(K, 256)/cdiv(K, 64)/' \
  -e 's/role main: warps 8 {/role main: warps 4 {/' -e 's/f32\[256, D\]/f32[64, D]/' -e 's/kt\*256 : +256/kt*64 : +64/g' \
  $K/assign_pingpong_coop.cake > $K/assign_pingpong_coop64.cake
cake check --backend cuda $K/assign_pingpong_coop_unfused.cake $K/assign_pingpong_coop64.cake --dim D=128
budgeted variants3 170 60 python3 scripts/gpu_assign_variants.py --out $RES/variants3 --rounds 3 \
  --variants assign_pingpong.cake assign_pingpong_coop.cake assign_pingpong_coop_unfused.cake assign_pingpong_coop64.cake
python3 - "$RES" <<'PY' | tee $RES/compare3.txt
import json, statistics, sys
data = json.load(open(f"{sys.argv[1]}/variants3/assign_variants.json"))
for k, v in data["summary"].items():
    print(f"{k}: {v['median']:.3f}x [{v['min']:.3f}, {v['max']:.3f}] over flash-kmeans")
PY
grep '^r[0-9]' $RES/variants3.log | tee -a $RES/compare3.txt
rm -f $K/assign_pingpong_coop_unfused.cake $K/assign_pingpong_coop64.cake
pack
cat $RES/stages.txt
