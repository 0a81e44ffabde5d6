# H200, written in session 16 (issue 14), not yet run: what session 16's pipeline (scripts/gpu/s16_kda.sh) left.
#   RES=/tmp/res OUT=/tmp/s17out setsid nohup bash scripts/gpu/s17_kda.sh > /tmp/s17.log 2>&1 < /dev/null &
#   sleep 5; bash scripts/gpu/poll.sh /tmp/res 560 /tmp/s17.log      (then poll.sh again at once). Carry [".whl"].
# Session 16 measured the staged schedule's kl16 variant at 1.037-1.134x of fla at four of the six shapes in three
# processes; the first process ran out of its 450 s (fla autotuned every shape there) before the two H = 64 varlen
# shapes, so they have two processes and the geomean none. Its `cake evolve --op kda` on the GPU timed the seed at
# h96_fixed only and called the speedup undefined: the fitness is the geomean over six shapes (fixed since: the
# evaluator times every fitness shape).
# Stages (one budget of 1560 s, S17_BUDGET overrides):
#   1. verify_staged_kl16 (<= 170 s): every kda_forward gate in bf16 under seeds 0, 1, 2 (the bench's verdict).
#   2. bench_1..3: the staged kl16 schedule alone at the six shapes against fla chunk_kda, a process each (the first
#      <= 560 s), and the summary.
#   3. kda_evolve (<= 640 s, 540 s of wall time): `cake evolve --op kda --device cuda --against fla_chunk_kda` from
#      the workload's seeds, each candidate gated and timed at all six shapes (fla's autotune cached by step 2),
#      then `cake report`.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
STAGED_KL16=$RES/kda_fused_staged_kl16.cake
bash scripts/kda_kl16_variant.sh experiments/kda/kda_fused_staged.cake > $STAGED_KL16
budget ${S17_BUDGET:-1560}
budgeted verify_staged_kl16 170 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 \
  --schedule $STAGED_KL16 --json $RES/verify_staged_kl16.json
KDA_BENCH_FIRST_CAP=560 kda_bench_processes 200 100 --schedule "$STAGED_KL16" \
  --seed-verdict "$RES/verify_staged_kl16.json"
kda_gpu_evolve 640 300 540
touch $RES/DONE
pack
cat $RES/stages.txt
