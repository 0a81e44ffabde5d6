# H200, a later session's call (issue 14 item 5: `cake evolve --op kda` on a GPU), carry [".whl", ".flashkda"] (FlashKDA's
# wheel in .flashkda/dist/ joins the fitness baselines when it imports); about 9.8 minutes.
# Measured fitness: each candidate passes the kda_forward gates (bf16 and the other declared dtypes; ~90 s of Triton
# compiles on the H200) and is timed at the six FlashKDA shapes against fla chunk_kda and FlashKDA, geomean speedup
# over the faster. fla autotunes at its first call per H (84-98 s): TRITON_CACHE_AUTOTUNING=1 keeps those results on
# disk, so only the first candidate's bench pays them. Expect 3-5 evaluations; the seed's fitness is ~0.22 (session 8's
# bench: 0.216x of FlashKDA, 0.405x of fla). Look for the per-candidate verdicts and fitness in kda_evolve.log and
# `cake report` of $RES/kda_evolve.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
bash scripts/gpu/flashkda_build.sh > $RES/fkda_install.log 2>&1
stage kda_evolve 585 cake evolve --op kda --device cuda --backend triton --seed 0 --evals-per-turn 2 \
  --wall-time 400 --out $RES/kda_evolve
cat $RES/stages.txt
