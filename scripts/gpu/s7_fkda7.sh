# Issue 14 item 2, session 7 (fkda7): FlashKDA built from source on the H200, smoke-called, gated and timed beside
# fla chunk_kda. The tokenspeed-flashkda cp312 wheel refuses every call under the H200's torch 2.11; this builds
# MoonshotAI/FlashKDA at 1ce47ea with CUTLASS v4.3.2 (experiments/kda/flashkda_source.json) against that torch.
# On the CPU machine nvcc 13.0 compiled csrc/smxx/fwd_launch.cu (the kernels: one translation unit, 14 explicit
# instantiations) for sm_90a with setup.py's flags, no spills, in 218 s of wall time on 2 shared cores (cicc and
# the host compiler of the CUDA stub each about half; MAX_JOBS helps only by compiling flash_kda.cpp beside it,
# nvcc --split-compile=0 spreads cicc's optimizer over the cores and left the SASS identical on the CPU machine).
# 300 s in all (`budgeted`, scripts/gpu/lib.sh: each stage under min(its cap, what is left)):
#   1. fkda7_build (<= 230 s; expect 80-160 s, never timed there): scripts/gpu/flashkda_build.sh, pip wheel of
#      upstream's setup.py with FLASH_KDA_CUDA_ARCHS=90a MAX_JOBS=16, installed into /tmp/site; the wheel comes back
#      in $OUT. Look for "flashkda_build: compiled in N s", "import flash_kda OK" and the SASS fingerprint line
#      ("the same machine code" as the CPU machine's build, or why not); the log holds nvcc's ptxas lines (expect
#      17 entries, 74-80 registers for the recurrence kernels, 0 spill bytes). A failed or cut build leaves its log
#      in fkda7_build.log and skips stages 2-4 (said in stages.txt). Carry the returned wheel in .flashkda/dist/ to
#      make this stage an install of a few seconds in a later call (then rerun this file for stages 2-4).
#   2. fkda7_smoke (<= 25 s; expect ~10 s): scripts/gpu_flashkda_smoke.py, two tiny cases (varlen at K = V = 128
#      with an initial state; dense at K = V = 64 through the adapter's zero padding) against the fp64 reference.
#      Look for "varlen_128 PASS" and "dense_64 PASS".
#   3. fkda7_verify (<= 75 s; expect ~50 s, one seed of host-side references): every kda_forward gate in bf16 on
#      audit_targets.py:flash_kda (--all-gates). Look for the verdict line; a failing gate is a finding about
#      FlashKDA (its replay token is in verify_flash_kda.json), not a reason to stop.
#   4. fkda7_bench (what is left, >= 30 s; expect 60-120 s for six shapes): scripts/gpu_kda_bench.py, fla
#      chunk_kda (fused flags, FLA_FLASH_KDA=0) and flash_kda interleaved at FlashKDA's six shapes, cold L2, fp64
#      spot checks, at most 15 s a shape; the JSON is rewritten after each shape. Look for each shape's two
#      medians and "baselines over fla_chunk_kda: {... 'flash_kda': X}" (published on an H200 at h64_fixed:
#      FlashKDA 1.209 ms vs fla 1.777 ms; fla here 2.019 ms at h64_fixed, 2.947 ms at h96_fixed). Our seed is
#      timed too when FKDA7_SEED_VERDICT names a passing `cake verify --schedule` JSON of it from this machine.
# Run from the repository root with carry [".whl", ".flashkda"] (lark, fla-core 0.6.0, einops wheels; FlashKDA's
# sources and CUTLASS's headers, 27.6 MB).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
budget 300
budgeted fkda7_build 230 60 bash scripts/gpu/flashkda_build.sh
if ! python3 -c "import flash_kda" > "$RES/fkda7_import.log" 2>&1; then
  echo "flash_kda not importable after fkda7_build (fkda7_build.log, fkda7_import.log): smoke, verify, bench skipped" \
    | tee -a "$RES/stages.txt"
  pack; cat "$RES/stages.txt"; exit 1
fi
budgeted fkda7_smoke 25 10 python3 scripts/gpu_flashkda_smoke.py --json "$RES/fkda7_smoke.json"
budgeted fkda7_verify 75 30 cake verify --op kda_forward --device cuda --dtypes bf16 --all-gates --timeout 60 \
  --kernel experiments/kda/audit_targets.py:flash_kda --json "$RES/verify_flash_kda.json"
budgeted fkda7_bench 300 30 python3 scripts/gpu_kda_bench.py --json "$RES/fkda7_bench.json" \
  --baselines fla_chunk_kda flash_kda --max-seconds 15 ${FKDA7_SEED_VERDICT:+--seed-verdict "$FKDA7_SEED_VERDICT"}
cat "$RES/stages.txt"
