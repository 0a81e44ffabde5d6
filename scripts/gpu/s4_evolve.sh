# H200 session 4 (issue 17.5, branch passes): one clean-start offline `cake evolve` of kmeans_assign from the
# plain seed (assign_plain.cake only: `cake evolve` never seeds from the workload's reference schedules) with the
# CUDA backend, the operators now generic passes whose numbers are params the search samples. At most 8 minutes
# of evolve + report (scripts/gpu_evolve.py runs `cake evolve --wall-time` then `cake report` on the run);
# the run directory is kept under $RES/evolve_s4/run, so later seeds on other days aggregate with
#   cake experiment report RUN_DIR RUN_DIR RUN_DIR --out DEST
# Expected runtime: 8 min. Look for: gpu_evolve.json's best speedup and whether its schedule has CONSUMERS > 2
# or a register split other than 40/232; the report's timed-candidate count and internal-error count (0).
source scripts/gpu/lib.sh
stage evolve_s4 500 python3 scripts/gpu_evolve.py --minutes 8 --backend cuda --evals-per-turn 4 --seed 0 --out $RES/evolve_s4
cat $RES/stages.txt
