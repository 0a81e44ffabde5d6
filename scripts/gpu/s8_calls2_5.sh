# H200 session 8, calls 2-5 as run by hand on the machine call 1 (s8_call1.sh) left warm, with carry [".whl",
# ".flashkda"] (FlashKDA's wheel from session 7 in .flashkda/dist/: installed, not rebuilt). Written down after the
# fact so the figures in RESULTS.md "Session 8" reproduce from a clean checkout; run it as one file (about 21 minutes,
# more than one call's 600 s: split it at the CALL lines). Raw results: results/h200-2026-12-02/s8-calls/.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
# CALL 2: a clean-start evolve seed (cut: see RESULTS.md), FlashKDA, the h96 half of the six-shape KDA bench
budget 575
budgeted evolve 300 120 python3 scripts/gpu_evolve.py --minutes 4.5 --backend cuda --evals-per-turn 4 --seed 1 \
  --out $RES/evolve
budgeted fkda_install 40 20 bash scripts/gpu/flashkda_build.sh
budgeted kda_bench 260 60 python3 scripts/gpu_kda_bench.py --json $RES/kda8_bench.json \
  --seed-verdict results/h200-2026-12-02/s7-calls3-4/verify_kda7_rr168.json --baselines fla_chunk_kda flash_kda \
  --max-seconds 100
# CALL 3: the h64 half, then fla chunk_kda under the gates (cut at 330 s: no verdict)
budget 560
budgeted kda_bench_h64 200 60 python3 scripts/gpu_kda_bench.py --json $RES/kda8_bench_h64.json \
  --seed-verdict results/h200-2026-12-02/s7-calls3-4/verify_kda7_rr168.json --baselines fla_chunk_kda flash_kda \
  --max-seconds 100 --shapes h64_fixed h64_varlen_mixed h64_varlen_1024x8
budgeted verify_fla_chunk 330 120 cake verify --op kda_forward --device cuda --timeout 300 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
# CALL 4: fla fused_recurrent_kda under the gates (fla's autotuned results cached on disk from here on)
export TRITON_CACHE_AUTOTUNING=1
stage verify_fla_recurrent 330 cake verify --op kda_forward --device cuda --timeout 300 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_fused_recurrent_kda --json $RES/verify_fla_fused_recurrent_kda.json
# CALL 5: fla chunk_kda again (cut at 320 s: no verdict)
stage verify_fla_chunk2 320 cake verify --op kda_forward --device cuda --timeout 300 --dtypes bf16 --all-gates \
  --kernel experiments/kda/audit_targets.py:fla_chunk_kda --json $RES/verify_fla_chunk_kda.json
pack
cat $RES/stages.txt
