# H200, written in session 17 (issue 14), not yet run: the GPU `cake evolve --op kda` with its six-shape measured
# fitness, long enough to store evaluations.
#   RES=/tmp/res OUT=/tmp/s18out setsid nohup bash scripts/gpu/s18_kda_evolve.sh > /tmp/s18.log 2>&1 < /dev/null &
#   sleep 5; bash scripts/gpu/poll.sh /tmp/res 560 /tmp/s18.log      (then poll.sh again at once, and again).
#   Carry [".whl"].
# Session 17's evolve on a fresh machine timed the seed at all six shapes (384 s, fla autotuning at both head
# counts) and was still verifying its f32 and f16 gates when the machine was taken back: nothing stored. A GPU KDA
# evaluation costs about nine minutes (bench 384 s on a fresh machine, then the f32 and f16 gates), and the first
# best is also confirmed under the other seeds in every dtype and re-timed in a fresh process (about five more):
# with 1,000 s of wall time the loop evaluates both seeds (the second starts near 870 s; the loop starts no
# evaluation past its wall time and finishes the one in flight), then `cake report`.
# Stages (one budget of 1500 s, S18_BUDGET overrides):
#   1. kda_evolve (<= 1440 s): `cake evolve --op kda --device cuda --against fla_chunk_kda --wall-time 1000`.
#   2. report: `cake report` on the run (what it stored, best first).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
budget ${S18_BUDGET:-1500}
kda_gpu_evolve 1440 600 1000
touch $RES/DONE
pack
cat $RES/stages.txt
