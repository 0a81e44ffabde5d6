# Superseded by s28_evolve.sh (session 28), which runs the same seeds with the plain ping-pong and unfused bests added
# to the comparison; this file is kept as session 25-27 notes cite it.
# H200, session 25 (issue 17): clean-start kmeans evolve seeds with the cost model that prices a deferred merge
# (session 24), on the bench server when its smoke passes (else one-shot bench processes), then every seed's
# best beside the fastest hand-made kernels (the held ping-pong, and it with its merge deferred by the `defer_merge`
# pass: experiments/kmeans/assign_pingpong_rs_defer.cake) and triton_assign, two processes each. Each seed runs
# `gpu_evolve.py --minutes 9.5` (8 minutes of turns); two seeds and the comparison fit a 30-minute budget. Last,
# the shipped deferred kernel's gates in bf16 and fp16 under three seeds (so far gated in bf16 only, in the bench).
#   RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s25_evolve.sh 14 15 > /tmp/s25.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 540 /tmp/s25.log until it says done (carry [".whl"]).
# Since session 25 (not lent a device, so not yet run) the loop ranks with compiled spills priced by where they land
# (L1 or L2) and with the calibration fitted to the evolve runs' own timings (codegen-4 events key, held-out rho 0.849,
# top-5 0.60): these seeds are that model's first unseen test. Since session 26 (CPU only too) the seeds also rank
# each child on its measured parent (`--anchor-on-parents`, the default on a GPU), draw operators with the offline
# agent's feedback on (`--operator-feedback`), and time with the protocol that never lets the device drain between
# event reads (`scripts/timing_sync_bias.py` over their samples should read about 0). Then, if time is left on a warm machine,
# scripts/gpu/s26_triton_cost.sh (Triton timings of today's codegen for the per-backend calibration).
source scripts/gpu/lib.sh
budget "${S25_BUDGET:-1380}"
# The bench server first (session 26): a seed reaches the hand-written ping-pong's neighbourhood in the cost model's own
# world after ~33 evaluations (8 turns; results/cpu-2026-12-05/model_world_s26.txt), about what a one-shot seed
# evaluates in 10 minutes, and the server saves the ~5 s of process starts of each. Seeds of 570 s leave the smoke its
# 100 and the comparison its ~110; with the smoke failed, one-shot processes as before.
server_or_one_shot
EVOLVE_SECONDS=${EVOLVE_SECONDS:-570}
kmeans_evolve_seeds "$@"
bests_vs_hand 300 60
budgeted verify_rs_defer 90 30 cake verify --schedule experiments/kmeans/assign_pingpong_rs_defer.cake --backend cuda \
  --device cuda --dtypes bf16 fp16 --seeds 0 1 2 --no-cache
touch $RES/DONE
pack
cat $RES/stages.txt
