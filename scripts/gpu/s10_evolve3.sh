# H200, session 10 (issue 17: a clean-start evolve seed; three are needed), carry [".whl"]; about 9.7 minutes.
# Session 8 ran this seed for 4.5 minutes: the plain seed died in its gates (f32 on the CUDA backend, E0611: fixed, the
# loop now gates a candidate only in the dtypes its backend lowers) and one turn of four candidates outlived the slack.
# Look for: "best" and "evaluations_to_parity" in $RES/evolve/gpu_evolve.json (fitness: measured speedup over the best
# of triton_assign, flash_kmeans, torch_mm at cake_cell), every candidate's verdict in evolve.log.
source scripts/gpu/lib.sh
stage evolve 500 python3 scripts/gpu_evolve.py --minutes 8 --backend cuda --evals-per-turn 4 --seed 3 --out $RES/evolve
cat $RES/stages.txt
