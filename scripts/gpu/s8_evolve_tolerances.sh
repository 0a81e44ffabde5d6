# H200, a later session's call (issues 17, 14), with carry [".whl"]; about 7.5 minutes (limits: 300 + 140). Written for
# session 7's second call, which went to the KDA defaults and FlashKDA instead (its Lloyd stage ran in the third).
# 1. evolve (~4.8 min): a clean-start evolve seed of the assign on the CUDA backend (issue 17 needs three; session 5's
#    died on an import, session 6's first call was cut by the call limit before it began).
# 2. kda_tolerances (what is left): the KDA GPU tolerance table over seeds 0 1 (session 6's 70 s printed nothing; the
#    fp64 recurrent reference walks every token at the GPU shapes). The verifier judges with the larger of the CPU and
#    GPU coefficients, so this table can only loosen a verdict. Commit $RES/kda_tolerances_cuda.json as
#    experiments/kda/tolerances_cuda.json if the command exits 0.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage evolve 300 python3 scripts/gpu_evolve.py --minutes 4.5 --backend cuda --evals-per-turn 4 --seed 1 --out $RES/evolve
stage kda_tolerances 140 sh -c "python3 -m cake.verifier.calibrate --device cuda --op kda_forward --seeds 0 1; rc=\$?;
  cp experiments/kda/tolerances_cuda.json $RES/kda_tolerances_cuda.json; exit \$rc"
cat $RES/stages.txt
