# H200, session 21 (issue 17): clean-start kmeans evolve seeds with the session's search changes — the offline agent
# sweeps the incumbent's structural neighbourhood every turn (one child of each structural operator that applies to
# the run's best), the loop breaks equal predictions toward the operator it has timed least, and `hold` hands the
# copy roles' idle registers to the consumers (`free_copy_regs`). Then, in the time left, the hand-written held
# ping-pong (`assign_pingpong_rs.cake`, fenced) and the ping-pong timed against triton_assign too (the strongest
# baseline at the cell, not timed beside the held kernel in session 20).
# Ran in session 21 with seeds 9 10 11 (results/h200-2026-12-04/s21/). Since then the agent repairs register refusals
# by re-splitting the file, the cost model takes its pipeline depth from the loop moving the most bytes, a held
# operand is a feature of its own, and near-equal predictions tie (cake.agents.ranking): session 22 measures those
# with new seeds (s22_evolve.sh).
#   RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s21_evolve.sh 9 10 11 > /tmp/s21.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s21.log until it says done (carry [".whl"]).
# Each seed as in lib.sh's kmeans_evolve_seeds. The whole file keeps within S21_BUDGET s.
source scripts/gpu/lib.sh
[ $# -gt 0 ] || { echo "usage: bash scripts/gpu/s21_evolve.sh SEED [SEED ...]"; exit 2; }
budget "${S21_BUDGET:-1500}"
kmeans_evolve_seeds "$@"
budgeted held_vs_triton 240 100 python3 scripts/gpu_assign_variants.py --out "$RES/held" --rounds 2 \
  --also triton_assign --variants assign_pingpong.cake assign_pingpong_rs.cake
touch $RES/DONE
pack
cat $RES/stages.txt
