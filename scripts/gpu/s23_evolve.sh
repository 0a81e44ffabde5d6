# H200, session 23 (issue 17): first the thread-block cluster lowering on a GPU — the ping-pong with its centroid
# stages multicast across clusters of 2 and 4 CTAs (assign_pingpong_mc.cake), gated then timed beside the plain
# ping-pong and triton_assign in one list of processes — then clean-start kmeans evolve seeds with what sessions 22
# and 23 added and no GPU has run: the cost model's correction, baseline retirement, the overlapped and then
# persistent bench process (one bench server per device: look at each evaluation's `seconds` against its
# `stages_s` and at `verifier_ahead` in the bench JSONs), `hold` with sink_past_mma, and the `cluster` operator.
# Then every seed's evolved best beside the hand-written ping-pong, its held variant and the multicast one.
#   RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s23_evolve.sh 12 13 > /tmp/s23.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s23.log until it says done (carry [".whl"]).
source scripts/gpu/lib.sh
[ $# -gt 0 ] || { echo "usage: bash scripts/gpu/s23_evolve.sh SEED [SEED ...]"; exit 2; }
budget "${S23_BUDGET:-1560}"
budgeted multicast 300 150 python3 scripts/gpu_assign_variants.py --out "$RES/mc" --rounds 1 --also triton_assign \
  --variants assign_pingpong.cake assign_pingpong_mc.cake assign_pingpong_mc.cake:CLUSTER=4
kmeans_evolve_seeds "$@"
budgeted evolved_vs_pingpong 300 100 python3 scripts/gpu_assign_variants.py --out "$RES/vs" --rounds 2 \
  --also triton_assign --variants assign_pingpong.cake assign_pingpong_rs.cake assign_pingpong_mc.cake \
  "${EVOLVED_BESTS[@]}"
touch $RES/DONE
pack
cat $RES/stages.txt
