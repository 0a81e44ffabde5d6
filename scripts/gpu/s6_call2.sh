# H200, session 6 call 2 (issues 14, 18), with carry [".whl"]; about 5 minutes. Call 1 (s6_next.sh) timed out in
# its update stages after two shapes and never reached the evolve stage; this call measures what the session's
# work needs first:
# 1. kda_profile (~60 s): where the tf32x3 chunk-parallel KDA seed's 9.4 ms go at h96_fixed (session 5's profile
#    predates tf32x3).
# 2. update_ranked (~130 s): the rank-sorted update at BN 1024/512/256/2048 at the three shapes call 1 missed.
# 3. update_sorted (~100 s): the counting-sort update's variants at d64 and k128, where it won in session 5.
source scripts/gpu/lib.sh
stage kda_profile 70 python3 scripts/gpu_kda_profile.py --out $RES/kda_profile --shapes h96_fixed
stage update_ranked 140 python3 scripts/gpu_update_sorted.py --out $RES/update_ranked --variants ranked \
  --shapes large_n d64 k128 --max-seconds 1
stage update_sorted 110 python3 scripts/gpu_update_sorted.py --out $RES/update_sorted --variants sorted \
  --shapes d64 k128 --max-seconds 1
cat $RES/stages.txt
