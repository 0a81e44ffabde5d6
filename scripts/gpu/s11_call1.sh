# H200 session 11, call 1 (issue 15), carry [".whl"]; about 5.5 minutes, one 330 s budget.
# Can a kernel that launches once reach the two-launch ping-pong? Three one-launch designs against it:
#   assign_pingpong_prodnorm.cake   the producer copies and sums ||c||^2 (56 + 2 x 224 registers), TMA lookahead 1
#   assign_pingpong_prodnorm40      the same at 40 + 2 x 232 (written here from prodnorm by sed: the consumers get
#                                   the two-launch kernel's 232; no spill at codegen 4 per ptxas)
#   assign_pingpong_normwg.cake     a fourth warpgroup sums ||c||^2 (24 + 40 + 2 x 224): the loader never waits on a
#                                   landing, so all STAGES copies are in flight
# 1. variants (~170 s): 3 rounds, each variant in its own process against the flash-kmeans timed there; the
#    "summary" lines in variants.log give median [min, max] speedups over flash-kmeans.
# 2. verify_best (~40-90 s): the gates (bf16, fp16, seeds 0 1) on the one-launch variant with the best median
#    (written to choice.txt with the comparison), and on normwg if that is not it.
# Look for: variants.log summary lines, choice.txt, "passed" in verify_*.json.
source scripts/gpu/lib.sh
budget 330
sed -e 's/regs 56 {/regs 40 {/; s/regs 224 {/regs 232 {/' \
  -e 's/^schedule assign_pingpong_prodnorm /schedule assign_pingpong_prodnorm40 /' \
  experiments/kmeans/assign_pingpong_prodnorm.cake > experiments/kmeans/assign_pingpong_prodnorm40.cake
budgeted variants 200 60 python3 scripts/gpu_assign_variants.py --out $RES/variants --rounds 3 \
  --variants assign_pingpong.cake assign_pingpong_prodnorm.cake assign_pingpong_prodnorm40.cake \
  assign_pingpong_normwg.cake
python3 - "$RES" <<'PY' | tee $RES/choice.txt
import json, sys
summary = json.load(open(f"{sys.argv[1]}/variants/assign_variants.json"))["summary"]
two = summary["assign_pingpong.cake"]
ones = {k: v for k, v in summary.items() if k != "assign_pingpong.cake"}
best = max(ones, key=lambda k: ones[k]["median"])
for k, v in [("assign_pingpong.cake", two), *ones.items()]:
    print(f"{k}: {v['median']:.3f}x [{v['min']:.3f}, {v['max']:.3f}]")
print(f"best one-launch: {best} (reaches the two-launch interval: {ones[best]['max'] >= two['min']})")
print(f"BEST={best}")
PY
BEST=$(sed -n 's/^BEST=//p' $RES/choice.txt); BEST=${BEST:-assign_pingpong_normwg.cake}
budgeted verify_best 100 30 cake verify --schedule experiments/kmeans/$BEST --backend cuda --device cuda \
  --dtypes bf16 fp16 --seeds 0 1 --json $RES/verify_best.json
if [ "$BEST" != assign_pingpong_normwg.cake ]; then
  budgeted verify_normwg 100 30 cake verify --schedule experiments/kmeans/assign_pingpong_normwg.cake --backend cuda \
    --device cuda --dtypes bf16 fp16 --seeds 0 1 --json $RES/verify_normwg.json
fi
pack
cat $RES/stages.txt
