# Superseded for the next seeds by kmeans_seeds_vs_hand.sh (three seeds and the comparison in one lease, without
# session 27's best). This file stays as sessions 28-30 ran it.
# Session 30 ran it so with seeds 18 19 on an H100 (main 5c4ae12); session 29 with 17 18 on an H100 (main 7c21920);
# session 28 with 15 16 on the H200 (main b6e668d).
# H200, session 28 (issue 17), carry [".whl"]: two clean-start kmeans evolve seeds (15, 16) on the device, so that
# with session 27's seed 14 (H100) the issue has its three. Then every seed's best beside the hand-written ping-pong (the
# issue's target), it held, it held with its merge deferred, and triton_assign, two processes each; beside them each
# best again without its `fuse` line where it has one (session 27's best ran 3-5% behind the deferred held kernel, and
# the fused launch is one of its two differences), and session 27's best with and without its `fuse` line. (Session 28
# also timed the Triton codegen-9 variants here, as s26_triton_cost.sh does: the H200 has that data now.)
#   S28_BUDGET=1450 RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s28_evolve.sh 17 18 > /tmp/s28.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s28.log until it says done.
# Afterwards: results to results/<device>-<date>/sNN/ (not server/compiled/), a RESULTS.md section, timing_sync_bias.py over
# the seeds' samples, fit_cost_model.py --write, and evolve_seeds.py over every seed so far.
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
# What a re-timing costs one-shot against in a process started ahead (session 29's change), if time is left.
budgeted retime_start 150 90 python3 scripts/gpu_retime_start.py --rounds 3 --out "$RES/retime_start.json"
touch $RES/DONE
pack
cat $RES/stages.txt
