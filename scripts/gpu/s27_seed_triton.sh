# H200, session 27 (issue 17), carry [".whl"]: one clean-start kmeans evolve seed, its best beside the fastest hand-made
# kernels, then the Triton timings of today's codegen — what s25_evolve.sh and s26_triton_cost.sh do, cut to fit
# what three failed machine starts left of the session's device time (~1,300 s of work): both of issue 17's open
# items move (a seed for the >= 3 the goal asks; codegen-9 data for the Triton calibration) rather than one.
#   S27_BUDGET=1100 RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s27_seed_triton.sh 14 > /tmp/s27.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s27.log until it says done.
# Afterwards: what s25_evolve.sh's and s26_triton_cost.sh's headers say (results to results/h200-<date>/s27/).
source scripts/gpu/lib.sh
budget "${S27_BUDGET:-1100}"
server_or_one_shot
EVOLVE_SECONDS=${EVOLVE_SECONDS:-570}
kmeans_evolve_seeds "$@"
bests_vs_hand 200 60
budgeted triton_graph 190 60 python3 scripts/gpu_time_variants.py --out "$RES/triton_cost/costdata" --backend triton \
  --clock graph --runs 3 --workers 12 --budget-s 150 --drain-s 15
touch $RES/DONE
pack
cat $RES/stages.txt
