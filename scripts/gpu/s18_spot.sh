# H200, session 18: what the timing protocol's fp64 spot checks cost the bench host per shape, the reference
# reused per input set (spot_check now) against recomputed on every check (before), at the six KDA shapes and the
# kmeans cell. Carry [".whl"]; about 2 minutes after setup, one 240 s budget.
source scripts/gpu/lib.sh
budget ${S18_SPOT_BUDGET:-240}
budgeted spot_kda 180 30 python3 scripts/spot_check_cost.py --op kda_forward --json $RES/spot_kda.json \
  --shapes h96_fixed h96_varlen_mixed h96_varlen_1024x8 h64_fixed h64_varlen_mixed h64_varlen_1024x8
budgeted spot_kmeans 50 10 python3 scripts/spot_check_cost.py --op kmeans_assign --shapes cake_cell \
  --json $RES/spot_kmeans.json
cat $RES/stages.txt
