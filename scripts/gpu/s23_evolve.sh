# H200, session 23 (issue 17): first session 23's new schedule space on a GPU — the ping-pong with its centroid
# stages multicast across clusters of 2 and 4 CTAs (assign_pingpong_mc.cake), and with its running argmin merged
# across the quad after the k loop (`defer`, made by the pass), each gated then timed beside the plain ping-pong and
# triton_assign in one list of processes — then the bench server smoke-tested (one one-shot request and two on one
# server: the wall a warm server saves; the seeds fall back to one-shot processes if it fails) — then clean-start
# kmeans evolve seeds with what sessions 22
# and 23 added and no GPU has run: the cost model's correction, baseline retirement, the overlapped and then
# persistent bench process (one bench server per device: look at each evaluation's `seconds` against its
# `stages_s` and at `verifier_ahead` in the bench JSONs), `hold` with sink_past_mma, the `cluster` and `defer`
# operators, and one exploration place per turn.
# Then every seed's evolved best beside the hand-written ping-pong, its held variant and the multicast one.
#   RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s23_evolve.sh 12 13 > /tmp/s23.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s23.log until it says done (carry [".whl"]).
source scripts/gpu/lib.sh
[ $# -gt 0 ] || { echo "usage: bash scripts/gpu/s23_evolve.sh SEED [SEED ...]"; exit 2; }
budget "${S23_BUDGET:-1560}"
# the deferred merge (`defer consumer best, besti`) of the ping-pong and of its multicast variant, made by the pass
python3 -c "
import sys
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.defer_merge import defer_merge
for name in ('assign_pingpong', 'assign_pingpong_mc'):
    kernel = defer_merge(parse(open(f'experiments/kmeans/{name}.cake').read(), name))
    open(f'$RES/{name}_defer.cake', 'w').write(print_kernel(kernel))
"
budgeted multicast 360 150 python3 scripts/gpu_assign_variants.py --out "$RES/mc" --rounds 1 --also triton_assign \
  --variants assign_pingpong.cake assign_pingpong_mc.cake assign_pingpong_mc.cake:CLUSTER=4 \
  "$RES/assign_pingpong_defer.cake" "$RES/assign_pingpong_mc_defer.cake"
# The bench server before the seeds rely on it: one one-shot request and two on one server (what each saves); if any
# is not timed, the seeds run with one-shot bench processes as before.
budgeted server_smoke 180 90 python3 scripts/gpu_bench_server_smoke.py --out "$RES/server"
EVOLVE_ARGS=()
python3 -c "import json, sys; sys.exit(0 if json.load(open('$RES/server/bench_server_smoke.json'))['ok'] else 1)" \
  2>/dev/null || { EVOLVE_ARGS+=(--no-reuse-bench-process); echo "seeds run with one-shot bench processes" | tee -a "$RES/stages.txt"; }
# A move whose hand-written variant failed its gates above is kept out of the seeds (a hung child would cost a seed
# its bench time limit each time the search tried it).
for pair in "cluster:assign_pingpong_mc.cake" "defer:$RES/assign_pingpong_defer.cake"; do
  python3 -c "
import json, sys
rows = json.load(open('$RES/mc/assign_variants.json'))['rows']
sys.exit(0 if any(r['variant'] == sys.argv[1] and r['status'] == 'timed' for r in rows) else 1)
" "${pair#*:}" 2>/dev/null || { EVOLVE_ARGS+=(--disable-operator "${pair%%:*}"); echo "seeds run without ${pair%%:*}" | tee -a "$RES/stages.txt"; }
done
kmeans_evolve_seeds "$@"
budgeted evolved_vs_pingpong 300 100 python3 scripts/gpu_assign_variants.py --out "$RES/vs" --rounds 2 \
  --also triton_assign --variants assign_pingpong.cake assign_pingpong_rs.cake assign_pingpong_mc.cake \
  "${EVOLVED_BESTS[@]}"
touch $RES/DONE
pack
cat $RES/stages.txt
