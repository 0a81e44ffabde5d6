# H200 session 12, call 1 (issue 15), carry [".whl"]; about 7 minutes, one 420 s budget.
# The fused ping-pong, assign_pingpong_coop.cake (`fuse centroid_norms into assign`: one cooperative kernel, the
# norm blocks grid-stride on the assign's CTAs, a grid-wide barrier, then the ping-pong), against the two-launch
# ping-pong it fuses (assign_pingpong.cake) and flash-kmeans:
# 0. coop_probe (~30 s): scripts/gpu_coop_launch.py's grid.sync() probe (s12_coop.sh's stage 1; what to look for
#    is said there): both cooperative entry points eager, in a CUDA graph, under driver capture, one block too many.
# 1. verify_coop (~60 s): the gates, bf16 and fp16, seeds 0 1 2 (verify_coop.json: "passed" per run).
# 2. variants (~150 s): 3 rounds, each variant in its own process against the flash-kmeans timed there; the
#    "summary" in variants/assign_variants.json gives median [min, max] speedups over flash-kmeans (compare.txt).
# 3. host (~100 s): both exported (C++ launcher), 3 processes each, alternating; host_summary_{coop,two}.log
#    "across runs" lines give the host time per call (goal: <= 10 us outside a graph).
# Look for: verify_coop.json passed, compare.txt, the two host summaries.
source scripts/gpu/lib.sh
budget 420
mkdir -p $RES/coop
budgeted coop_probe 60 30 python3 scripts/gpu_coop_launch.py probe --out $RES/coop
budgeted verify_coop 110 40 cake verify --schedule experiments/kmeans/assign_pingpong_coop.cake --backend cuda \
  --device cuda --dtypes bf16 fp16 --seeds 0 1 2 --json $RES/verify_coop.json
budgeted variants 200 60 python3 scripts/gpu_assign_variants.py --out $RES/variants --rounds 3 \
  --variants assign_pingpong.cake assign_pingpong_coop.cake
python3 - "$RES" <<'PY' | tee $RES/compare.txt
import json, sys
summary = json.load(open(f"{sys.argv[1]}/variants/assign_variants.json"))["summary"]
for k, v in summary.items():
    print(f"{k}: {v['median']:.3f}x [{v['min']:.3f}, {v['max']:.3f}] over flash-kmeans")
PY
export CAKE_EXPORT_CACHE=/tmp/s12_launcher
for k in coop two; do
  src=experiments/kmeans/assign_pingpong.cake; [ $k = coop ] && src=experiments/kmeans/assign_pingpong_coop.cake
  budgeted export_$k 20 10 cake export $src --backend cuda --arch sm_90a --static D=128 --name cake_s12_$k \
    -o /tmp/s12_$k
done
budgeted build_launcher 25 15 python3 -c "from cake.export.runtime import _launcher; print(_launcher.build())"
for i in 1 2 3; do
  for k in coop two; do
    budgeted host_${k}_$i 12 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py \
      --package /tmp/s12_$k --label ${k}_$i --out $RES/host_$k
  done
done
for k in coop two; do
  python3 scripts/gpu_host_overhead.py --summarize $RES/host_$k/host_${k}_*.json --out $RES/host_$k \
    | tee $RES/host_summary_$k.log
done
pack
cat $RES/stages.txt
