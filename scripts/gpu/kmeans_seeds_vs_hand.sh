# Issue 17's evidence in one call: clean-start kmeans evolve seeds (the sampling search from the plain seed, ranked with
# the stored calibration of the GPU present, which no reference kernel or reported win trained), then every seed's best
# beside the hand-written ping-pong, it held, it held with its merge deferred, and triton_assign, two bench processes each.
# The seeds share what the budget leaves after the bench server's smoke and BESTS_RESERVE seconds (default 190) kept for
# the comparison: each runs an even share of what is left among the seeds still to run (so the minute or so a seed
# ends before its wall goes to the next), at most EVOLVE_SECONDS (default 570, the 10 minutes less the report),
# and ends on its own clock; the last seeds are skipped when the rest cannot have EVOLVE_MIN_SECONDS (default 300) each. Pass
# BUDGET_DEADLINE (epoch seconds: the call's time + the lease's budget_left_s - 75) so a slow machine start still leaves
# the comparison its time.
#   KMEANS_BUDGET=1600 BUDGET_DEADLINE=... RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/kmeans_seeds_vs_hand.sh 23 24 25 > /tmp/seeds.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/seeds.log until it says done (carry [".whl"]).
# Session 31 ran it so with seeds 20 21 22 (main ce1f4e9) on an H100 (the call named nvidia-h200), with one share
# fixed up front (347 s a seed). Session 32 ran it with seeds 23 24 25 (main 44877b9), again on an H100 served for the
# H200: loop clocks 359, 391 and 458 s, ~1,590 s of device time in all. Session 33 ran seeds 26 27 28 (main 80e8895) on
# an H100 served for the H200 after nine refused starts had spent ~700 s: the deadline left 965 s, seeds 26 and 27 ran
# (275 and 354 s) and 28 was skipped. Session 34 ran seeds 28 29 30 (main 7a642cb) on an H200, the device, after
# three refused starts (~270 s): the deadline left 1,312 s; loop clocks 258, 306 and 349 s, bests_vs_hand 151 s.
# Next: seeds 31 onward, on either GPU, to widen the spread; name the GPU a run is served with in RESULTS.md.
# Afterwards: results to results/<device>-<date>/sNN/ (not server/compiled/), a RESULTS.md section, timing_sync_bias.py
# over the seeds' samples, rank_run_candidates.py, fit_cost_model.py --write, and evolve_seeds.py over every seed so far.
source scripts/gpu/lib.sh
budget "${KMEANS_BUDGET:-1600}"
server_or_one_shot
BESTS_RESERVE=${BESTS_RESERVE:-190}
EVOLVE_SECONDS=${EVOLVE_SECONDS:-570} EVOLVE_SHARE=1 EVOLVE_MIN_SECONDS=${EVOLVE_MIN_SECONDS:-300} \
  BUDGET_RESERVE=$BESTS_RESERVE kmeans_evolve_seeds "$@"
bests_vs_hand 400 60
touch "$RES/DONE"
pack
cat "$RES/stages.txt"
