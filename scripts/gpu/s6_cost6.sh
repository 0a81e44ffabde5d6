# H200 session 6, cost6 (issue 17 item 3): does the CUDA-backend cost model's WARPS prediction extrapolate?
# Session 5's CUDA timings hold no WARPS=8 plain variant (all 41 were the WARPS=8 wrong-answer bug, fixed since),
# and the terms added in session 6 (each thread's serial 16-byte tile loads and the busiest warp's issue in the
# iteration chain) predict WARPS=8 at 0.58-0.91x the time of WARPS=4 for the same BN/BK. This times 24 CUDA
# variants (assign_plain and assign_plain_norms, BN 64/128/256 x BK 32/64 x WARPS 4/8, STAGES=2; STAGES does
# nothing on this backend) in 2 interleaved runs, as run stores the fitter reads. Expected ~45 s.
# Afterwards, on a CPU: python3 scripts/fit_cost_model.py $RES/cost6/costdata/runs/* (prior rho over the 24 =
# the model as it ranks CUDA candidates now: the CUDA key is uncalibrated) and
# python3 scripts/cost_residuals.py $RES/cost6/costdata/runs/* (the WARPS row: ~0 if the terms hold).
source scripts/gpu/lib.sh
ONLY=()
for k in assign_plain assign_plain_norms; do for bn in 64 128 256; do for bk in 32 64; do for w in 4 8; do
  ONLY+=(--only "$k:BN=$bn BK=$bk STAGES=2 WARPS=$w")
done; done; done; done
stage cost6_warps8 60 python3 scripts/gpu_time_variants.py --out "$RES/cost6/costdata" --backend cuda --runs 2 \
  --workers 12 --budget-s 35 --drain-s 12 "${ONLY[@]}"
cat $RES/stages.txt
