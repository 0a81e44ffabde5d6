# H200, session 22 (issue 17): clean-start kmeans evolve seeds with the search as session 21 left it — register
# refusals on setmaxnreg kernels repaired by re-splitting the file (fit_consumer_regs / free_copy_regs), the cost
# model's pipeline depth taken from the loop that moves the most bytes, a held operand as a feature of its own, and
# near-equal predictions tied toward the operator timed least (cake.agents.ranking). Then the comparison in
# one list of processes: every seed's evolved best beside the hand-written ping-pong and its held variant, each
# timed interleaved with flash-kmeans and triton_assign, two rounds.
#   RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s22_evolve.sh 12 13 14 > /tmp/s22.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s22.log until it says done (carry [".whl"]).
source scripts/gpu/lib.sh
[ $# -gt 0 ] || { echo "usage: bash scripts/gpu/s22_evolve.sh SEED [SEED ...]"; exit 2; }
budget "${S22_BUDGET:-1560}"
kmeans_evolve_seeds "$@"
budgeted evolved_vs_pingpong 300 100 python3 scripts/gpu_assign_variants.py --out "$RES/vs" --rounds 2 \
  --also triton_assign --variants assign_pingpong.cake assign_pingpong_rs.cake "${EVOLVED_BESTS[@]}"
touch $RES/DONE
pack
cat $RES/stages.txt
