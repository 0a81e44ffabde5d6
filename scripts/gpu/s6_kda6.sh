# Issue 14, session 6 (kda6): the chunk-parallel KDA schedule with its output folded into recur (no per-chunk
# state snapshots: 805 MB written and read back at h96_fixed, the output launch and two scratch fills gone) and
# intra walking K in slices (no spills; it had 304 bytes). Session 6's first profile (s6-call2): 9.36 ms of
# kernels per call at h96_fixed (intra 4.98, recur 3.30, output 0.44, fills 0.64) vs fla chunk_kda 2.61 ms.
# Timing first, so a verify that runs long cannot cost the figure; 150 s in all:
#   1. kda6_profile (<= 25 s): per-launch device time of ours and of fla chunk_kda at h96_fixed, each compiled
#      kernel's registers/spills. Look for "ms of kernels per call" on both lines and the intra / recur rows.
#      A diagnosis, not the benchmark (no verdict consulted).
#   2. kda6_verify (<= 100 s): the kda_forward gates, bf16, seeds 0 and 1 (101 s this morning with the old
#      schedule, mostly host-side references; --timeout 60 bounds each gate, the stage limit the whole).
#      Look for "kda_forward: PASSED" under both seeds; verify_kda6.json is what the bench reads.
#      If it is cut, the profile stands as the only figure and the verdict is open.
#   3. kda6_bench (<= 25 s): the benchmark at h96_fixed, ours vs fla chunk_kda interleaved, cold L2, fp64 spot
#      checks; it times ours only if stage 2 passed. Look for the speedup line (was 0.278x).
# Run from the repository root with carry [".whl"] (lark, fla-core 0.6.0, einops wheels, as s4_kda.sh).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
SCHED=experiments/kda/kda_fused_chunkpar.cake
stage kda6_profile 25 python3 scripts/gpu_kda_profile.py --out $RES/kda6_profile.json --schedule $SCHED \
  --shapes h96_fixed
stage kda6_verify 100 cake verify --device cuda --timeout 60 --dtypes bf16 --seeds 0 1 --schedule $SCHED \
  --json $RES/verify_kda6.json
stage kda6_bench 25 python3 scripts/gpu_kda_bench.py --json $RES/kda6_bench.json --schedule $SCHED \
  --seed-verdict $RES/verify_kda6.json --shapes h96_fixed --max-seconds 10
cat $RES/stages.txt
