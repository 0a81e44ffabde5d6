# H200 session 10, call 1 (issue 15), carry [".whl"]; about 9 minutes, one 540 s budget.
# 1. assign_pingpong_prodnorm.cake (one launch; the producer warpgroup sums ||c||^2 into a shared stage) against the
#    two-launch assign_pingpong.cake: 3 rounds, each variant in its own process against the flash-kmeans timed in
#    that process (summary line: median [min, max] of the speedups); then its gates (bf16, fp16, seeds 0 1).
# 2. Only when the one-launch interval reaches the two-launch one's and its gates pass: export it, the exported
#    op's host time (3 C++ processes), the exported op against CAKE's callable at the cell with graph capture and
#    replay (gpu_export.py), `cake certify` in bf16 and fp16, and `cake bench` at the cell interleaved with every
#    baseline (triton_assign is the strongest) — the evidence for making it the exported assign.
# Look for: "summary" lines in variants.log, "passed" in verify.json, host_summary.log's per-call microseconds.
source scripts/gpu/lib.sh
budget 540
ONE=experiments/kmeans/assign_pingpong_prodnorm.cake
budgeted variants 175 60 python3 scripts/gpu_assign_variants.py --out $RES/variants --rounds 3 \
  --variants assign_pingpong.cake assign_pingpong_prodnorm.cake
budgeted verify 100 40 cake verify --schedule $ONE --backend cuda --device cuda --dtypes bf16 fp16 --seeds 0 1 \
  --json $RES/verify.json
if python3 - "$RES" <<'PY'
import json, sys
res = sys.argv[1]
summary = json.load(open(f"{res}/variants/assign_variants.json"))["summary"]
two, one = summary["assign_pingpong.cake"], summary["assign_pingpong_prodnorm.cake"]
passed = json.load(open(f"{res}/verify.json"))["passed"]
print(f"one-launch {one['median']:.3f}x [{one['min']:.3f}, {one['max']:.3f}] vs two-launch {two['median']:.3f}x "
      f"[{two['min']:.3f}, {two['max']:.3f}]; gates passed: {passed}")
sys.exit(0 if passed and one["max"] >= two["min"] else 1)
PY
then
  export_evidence $ONE s10 3
else
  echo "stage export skipped: the one-launch kernel is slower or failed its gates" | tee -a $RES/stages.txt
fi
pack
cat $RES/stages.txt
