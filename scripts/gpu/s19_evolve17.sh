# H200, written in session 17 (issue 17), not yet run: clean-start evolve seeds from the plain seed at the full ten
# minutes the issue allows a seed (seeds 1-4 ran 4.5 to 8 minutes of which 270-300 s were wall time for turns, and
# stopped at 0.76-0.96x of the best baseline; seed 3's best differed from the hand-written ping-pong mainly in
# STAGES 2 against 4, the move the CUDA model ranks first from it). Session 19 adds, before it runs: every declared
# dtype gated in the bench worker's one verifier session (no second worker per evaluation), a confirmation that
# reuses the run seed's per-dtype verdicts, and the `widen` operator (a param at its domain's end steps past it).
#   bash scripts/gpu/s19_evolve17.sh 5 6          (two seeds: about 20 minutes; carry [".whl"])
#   RES=/tmp/res OUT=/tmp/s19out PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s19_evolve17.sh 5 6 > /tmp/s19.log 2>&1 < /dev/null &
#   (PRIVATE_COPY=1: the pipeline runs from its own copy of the tree, which later calls do not re-copy: private_copy.sh)
#   then bash scripts/gpu/poll.sh /tmp/res 560 /tmp/s19.log until it says done.
# Each seed: `gpu_evolve.py --minutes 10 --backend cuda --evals-per-turn 4 --seed N` (fitness: the measured speedup
# at cake_cell over the best of triton_assign, flash_kmeans and torch_mm, the best re-timed in a fresh process).
# Then `evolve_seeds.py` over every seed run here; add the committed seeds' gpu_evolve.json files by hand for the
# three-seed curve (results/h200-2026-12-03/s10-calls/evolve_seed*/, s11-calls/evolve4/).
source scripts/gpu/lib.sh
[ $# -gt 0 ] || { echo "usage: bash scripts/gpu/s19_evolve17.sh SEED [SEED ...]"; exit 2; }
runs=()
for seed in "$@"; do
  stage evolve_seed$seed 640 python3 scripts/gpu_evolve.py --minutes 10 --backend cuda --evals-per-turn 4 \
    --seed "$seed" --out "$RES/evolve_seed$seed"
  runs+=("$RES/evolve_seed$seed/gpu_evolve.json")
done
stage seeds 20 python3 scripts/evolve_seeds.py "${runs[@]}" --json "$RES/evolve_seeds.json"
touch $RES/DONE
pack
cat $RES/stages.txt
