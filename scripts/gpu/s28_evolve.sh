# Next (after session 28, whose H200 seeds 15 and 16 each stalled on one poor draw of `warp_specialize`): run this
# again with seeds 17 18. The offline agent now draws a family move 16 times and proposes the draw the model prices
# fastest, and E0308 refuses the wgmma children ptxas cannot compile (four of seed 15's 23 evaluations). Session 29
# ran it so, with S28_BUDGET and BUDGET_DEADLINE (the lease's end by this machine's clock, less 60 s): the seeds keep
# BESTS_RESERVE (170 s) for the comparison and end on their own clock.
# H200, session 28 (issue 17), carry [".whl"]: two clean-start kmeans evolve seeds (15, 16) on the device, so that
# with session 27's seed 14 (H100) the issue has its three. Then every seed's best beside the hand-written ping-pong (the
# issue's target), it held, it held with its merge deferred, and triton_assign, two processes each; beside them each
# best again without its `fuse` line where it has one (session 27's best ran 3-5% behind the deferred held kernel, and
# the fused launch is one of its two differences), and session 27's best with and without its `fuse` line. (Session 28
# also timed the Triton codegen-9 variants here, as s26_triton_cost.sh does: the H200 has that data now.)
#   S28_BUDGET=1450 RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s28_evolve.sh 17 18 > /tmp/s28.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s28.log until it says done.
# Afterwards: results to results/h200-<date>/s28/ (not server/compiled/), a RESULTS.md section, timing_sync_bias.py over
# the seeds' samples, fit_cost_model.py --write, and evolve_seeds.py over seeds 14-16.
source scripts/gpu/lib.sh
budget "${S28_BUDGET:-1450}"
server_or_one_shot
EVOLVE_SECONDS=${EVOLVE_SECONDS:-570}
# The side-by-side comparison is what says whether a seed beat the hand-written kernel: the seeds leave it its time.
BUDGET_RESERVE=${BESTS_RESERVE:-170} kmeans_evolve_seeds "$@"
# Session 27's best (H100) fused its norms launch and ran 3-5% behind the deferred held kernel: it and its unfused copy
# join the comparison, so the pair says what the fusion costs on the H200.
S27_BEST=results/h100-2026-12-05/s27/evolve_seed14/best.cake
mapfile -t UNFUSED < <(unfused_copies "${EVOLVED_BESTS[@]}" "$S27_BEST")
bests_vs_hand 400 60 "$S27_BEST" "${UNFUSED[@]}"
touch $RES/DONE
pack
cat $RES/stages.txt
