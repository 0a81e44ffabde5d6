# H200 session 5 (branch warps5): the CUDA backend's 8-warp mma.sync fix. s5-call1 found 35 WARPS=8 CUDA variants
# of the plain assigns wrong (rows BN/2.. of `ids` never written: on sm_90a the warp index wrapped at 4). Re-run
# the same quick check (fp64 in full at B=2 N=256, now on a second call into poisoned output buffers, then the
# timing protocol with its sampled re-check at B=8 N=16384 K=1024 D=128 bf16) on five of them (8 x 1, 4 x 2 and
# 2 x 4 warp grids; out-of-range and in-range symptoms) and two WARPS=4 controls. Expected: ~35 s, 7 `timed`.
source scripts/gpu/lib.sh
stage warps5_recheck 60 python3 scripts/gpu_time_variants.py --out $RES/warps5 --backend cuda --runs 1 \
  --workers 7 --budget-s 30 --drain-s 12 --load-limit-s 25 --time-limit-s 8 \
  --only "assign_plain:BN=128 BK=64 STAGES=3 WARPS=8" \
  --only "assign_plain:BN=32 BK=128 STAGES=2 WARPS=8" \
  --only "assign_plain:BN=256 BK=16 STAGES=3 WARPS=8" \
  --only "assign_plain_norms:BN=64 BK=64 STAGES=2 WARPS=8" \
  --only "assign_plain_norms:BN=256 BK=128 STAGES=3 WARPS=8" \
  --only "assign_plain:BN=128 BK=64 STAGES=2 WARPS=4" \
  --only "assign_plain_norms:BN=64 BK=128 STAGES=3 WARPS=4"
cat $RES/stages.txt
