# Issue 14, session 6 (kda6): the chunk-parallel KDA schedule, reworked without a GPU:
#   - its output launch folded into recur (no per-chunk state snapshots: 805 MB written and read back at
#     h96_fixed, plus the output launch and two scratch fills, gone);
#   - intra walks K in slices of BK = 32 (no spills at 8 warps; it had 304 bytes), runs at 4 warps (two programs
#     an SM instead of one; 40 bytes spilled) and its first Tm doubling is exact;
#   - recur holds the state transposed, [BV, K], at BV = 32 (4 V tiles x H programs where BV = 16 made 8:
#     about 2 waves on 132 SMs instead of 3; 255 registers, 8 bytes spilled, Triton 3.9 AOT for sm_90a).
# Session 6's first profile (s6-call2): 9.36 ms of kernels per call at h96_fixed (intra 4.98, recur 3.30,
# output 0.44, fills 0.64); fla chunk_kda 2.61 ms (session 5's bench: ours 9.386 ms = 0.278x).
# 150 s in all; the bench needs the verdict, so the verify runs first:
#   1. kda6_verify (<= 105 s): the kda_forward gates, bf16, seeds 0 and 1 (96-101 s in session 5 and this
#      morning with the old schedule, mostly host-side references; --timeout 60 bounds each gate). Look for
#      "kda_forward: PASSED" under both seeds; verify_kda6.json is what the bench reads.
#   2. kda6_bench (<= 45 s or what is left): h96_fixed, ours vs fla chunk_kda interleaved, cold L2, fp64 spot
#      checks; ours is timed only if stage 1 passed. Look for the speedup line (session 5: 0.278x).
#   3. kda6_profile (what is left of the 150 s, skipped under 12 s): per-launch device time of ours only (fla's
#      autotuning did not fit 70 s this morning), for the default and the variants the CPU could not rank, each
#      printed as it finishes: recur's V tile (BV 16 / 64), its loads pipelined (STAGES_RECUR 2: 72 bytes
#      spilled), intra at 8 warps (one program an SM, no spills). Look for the
#      "ms of kernels per call" line of each variant and its intra / recur rows.
# Run from the repository root with carry [".whl"] (lark, fla-core 0.6.0, einops wheels, as s4_kda.sh).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
SCHED=experiments/kda/kda_fused_chunkpar.cake
budget 150  # `budgeted` (scripts/gpu/lib.sh): each stage under min(its cap, what is left of the 150 s)
budgeted kda6_verify 105 60 cake verify --device cuda --timeout 60 --dtypes bf16 --seeds 0 1 --schedule $SCHED \
  --json $RES/verify_kda6.json
budgeted kda6_bench 45 20 python3 scripts/gpu_kda_bench.py --json $RES/kda6_bench.json --schedule $SCHED \
  --seed-verdict $RES/verify_kda6.json --shapes h96_fixed --max-seconds 10
budgeted kda6_profile 150 12 python3 scripts/gpu_kda_profile.py --out $RES/kda6_profile.json --schedule $SCHED \
  --shapes h96_fixed --no-fla --params '{}' '{"BV": 16}' '{"STAGES_RECUR": 2}' '{"WARPS_INTRA": 8}' '{"BV": 64}'
cat $RES/stages.txt
