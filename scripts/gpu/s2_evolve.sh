# H200 session 2, call 2: a clean-start offline `cake evolve` on the CAKE cell with the CUDA backend
# (issue 7): seed assign_plain.cake, fitness = measured speedup over the better of flash-kmeans 0.3.1 and
# the plain Triton sweep's best config, every timed candidate verified first by the bf16 battery.
source scripts/gpu/lib.sh
stage evolve 520 python3 scripts/gpu_evolve.py --minutes 8.5 --backend cuda --evals-per-turn 4 --out $RES/evolve
cat $RES/stages.txt
