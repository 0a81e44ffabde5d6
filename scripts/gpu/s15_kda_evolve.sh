# H200, issue 14 (Build item 5): `cake evolve --op kda` on a GPU with measured fitness. Each candidate passes the
# kda_forward gates in its servable dtypes and is timed at the fitness shape (h96_fixed) interleaved with fla
# chunk_kda; fitness is the speedup. One call of <= 600 s, carry [".whl"]; the seed alone took 323 s (gates and
# timing, fla's autotune included), so expect the seed turn and one more.
# Session 15 ran it without --against: the workload's fitness is also over FlashKDA, not installed here, so the
# seed's speedup was undefined and the run found nothing (results/h200-2026-12-03/s15-evolve). A run now refuses
# to start in that case; this one names fla chunk_kda (FlashKDA fails the contract's fp32 final_state, and
# building it needs .flashkda/ carried: scripts/gpu/flashkda_build.sh).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
stage kda_evolve 500 cake evolve --op kda --device cuda --backend triton --seed 0 --evals-per-turn 2 \
  --against fla_chunk_kda --wall-time 360 --out $RES/kda_evolve
stage report 30 cake report $RES/kda_evolve
cat $RES/stages.txt
