# H200, session 11 (issue 17), carry [".whl"]; about 8.5 minutes. A fourth clean-start evolve seed, the first at CUDA
# codegen 4 (seeds 1-3 ran at codegen 2): the plain seed's shared ||c||^2 sum and every warp-specialized candidate's
# now lower to one row per lane with 16-byte loads, so the search's fitness landscape moved. Seeds 1-3's bests:
# 0.903x, 0.759x, 0.953x of the best baseline (RESULTS.md, session 10).
# Look for: "best" and "evaluations_to_parity" in $RES/evolve/gpu_evolve.json (fitness: measured speedup over the best
# of triton_assign, flash_kmeans, torch_mm at cake_cell), every candidate's verdict in evolve.log; the run store
# (run.sqlite, candidates/) is packed with it so the timed candidates can feed the cost fit.
source scripts/gpu/lib.sh
stage evolve 500 python3 scripts/gpu_evolve.py --minutes 7.5 --backend cuda --evals-per-turn 4 --seed 4 --out $RES/evolve
cat $RES/stages.txt
