# H200, session 24 (issue 17): what session 23's run lost with its machine, most certain first. In separate bench
# processes (--rounds 2), seed 12's best from the lost run (#66, results/h200-2026-12-05/seed12_best_c66.cake), the
# hand-written ping-pong, its held form (assign_pingpong_rs) and its deferred-merge variant, each beside
# flash_kmeans and triton_assign; the bench server smoke-tested with three variants that fit and fresh caches (skip it with SKIP_STAGES=server_smoke); then one
# clean-start kmeans evolve seed (13) on the server, or in one-shot bench processes when the smoke did not pass.
#   RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s24_evolve.sh > /tmp/s24.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s24.log until it says done (carry [".whl"]).
source scripts/gpu/lib.sh
budget "${S24_BUDGET:-720}"
python3 -c "
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.defer_merge import defer_merge
kernel = defer_merge(parse(open('experiments/kmeans/assign_pingpong.cake').read(), 'assign_pingpong'))
open('$RES/assign_pingpong_defer.cake', 'w').write(print_kernel(kernel))
"
budgeted evolved_vs_pingpong 260 60 python3 scripts/gpu_assign_variants.py --out "$RES/vs" --rounds 2 \
  --also triton_assign --variants results/h200-2026-12-05/seed12_best_c66.cake assign_pingpong.cake \
  assign_pingpong_rs.cake "$RES/assign_pingpong_defer.cake"
budgeted server_smoke 120 60 python3 scripts/gpu_bench_server_smoke.py --out "$RES/server"
EVOLVE_ARGS=()
python3 -c "import json, sys; sys.exit(0 if json.load(open('$RES/server/bench_server_smoke.json'))['ok'] else 1)" \
  2>/dev/null || { EVOLVE_ARGS+=(--no-reuse-bench-process); echo "seeds run with one-shot bench processes" | tee -a "$RES/stages.txt"; }
kmeans_evolve_seeds 13
touch $RES/DONE
pack
cat $RES/stages.txt
