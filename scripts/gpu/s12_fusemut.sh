# H200, session 12, branch fusemut (the `fuse` search operator), carry [".whl"]; about 5 minutes, one 330 s budget.
# Whether the operator's move is right and worth anything on the family the offline search reaches (not the
# hand-written assign_pingpong_coop.cake, which s12_call1 times): `warp_specialize` on the plain seed (norms hoisted
# into a launch of their own, TMA producer, ping-pong consumers, persistent grid) at the pass's defaults, and
# `fuse_launches` of it (one cooperative kernel: the norm blocks grid-stride on the assign's CTAs, a grid barrier).
# 1. pair (~20 s): writes $RES/pair/{two_launch,fused}.cake, the cost model's ms for each (CUDA backend, cake_cell;
#    it prices the fusion as a grid barrier instead of a launch: ~1.6 us apart), ptxas per kernel (fused: one kernel).
# 2. verify_fused (~90 s): the contract gates on the fused child, bf16 and fp16 (verify_fused.json "passed").
# 3. bench_{two_launch,fused}_{1,2,3} (~30 s each): `cake bench` at cake_cell against flash-kmeans, alternating
#    the two schedules, one process each; compare.txt: each schedule's speedup over the flash-kmeans timed in the
#    same process, median [min, max] over the 3 rounds. Look for: fused >= two_launch (the launch it saves is a few
#    us of host path at ~1.1-2.4 ms a call, so expect a difference inside the rounds' spread; a fused child slower
#    by more than the spread means its barrier or its norm blocks on the assign's CTAs cost more than the model says).
source scripts/gpu/lib.sh
budget 330
budgeted pair 60 20 python3 scripts/fuse_operator_pair.py --out $RES/pair --compile
budgeted verify_fused 120 40 cake verify --schedule $RES/pair/fused.cake --backend cuda --device cuda \
  --dtypes bf16 fp16 --json $RES/verify_fused.json
for i in 1 2 3; do
  for k in two_launch fused; do
    budgeted bench_${k}_$i 45 25 env CAKE_BACKEND=cuda cake bench --schedule $RES/pair/$k.cake --shapes cake_cell \
      --baseline flash_kmeans --reps 50 --max-seconds 15 --json $RES/bench_${k}_$i.json
  done
done
python3 - "$RES" <<'PY' | tee $RES/compare.txt
import json, statistics, sys
from pathlib import Path
res = Path(sys.argv[1])
for k in ("two_launch", "fused"):
    speedups = []
    for path in sorted(res.glob(f"bench_{k}_*.json")):
        rows = [m for s in json.loads(path.read_text())["shapes"] for m in s["measurements"]
                if m["median_ms"] is not None and not m["failure"] and not m["implausible"]]
        cand = next((m["median_ms"] for m in rows if m["candidate"]), None)
        fk = next((m["median_ms"] for m in rows if m["name"] == "flash_kmeans"), None)
        if cand and fk:
            speedups.append(fk / cand)
            print(f"{path.name}: {cand:.4f} ms, flash_kmeans {fk:.4f} ms")
    if speedups:
        print(f"{k}: {statistics.median(speedups):.3f}x [{min(speedups):.3f}, {max(speedups):.3f}] over flash-kmeans "
              f"({len(speedups)} rounds)")
    else:
        print(f"{k}: no timed round (see bench_{k}_*.log)")
PY
pack
cat $RES/stages.txt
