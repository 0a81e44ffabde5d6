# Issue 14 on one H200 (about 5 min): the chunk-parallel KDA schedule (experiments/kda/kda_fused_chunkpar.cake,
# fla's chunk_kda structure in three launches) through the kda_forward contract gates in bf16 under seeds 0 and 1,
# then timed against fla chunk_kda (fused flags, FLA_FLASH_KDA=0) at FlashKDA's six shapes, interleaved in one
# process, cold L2; the last line of the bench log is the geomean speedup. Run from the repository root with
# carry [".whl"]; .whl/ holds (py3-none-any wheels) lark-1.3.1, fla_core-0.6.0 and einops-0.8.2.
# Expected: verify ~80-150 s (Triton compiles three kernels per (K, V) pair, nine pairs; the naive seed took 79 s
# for one seed), bench ~60-130 s (six shapes, fp64 spot checks on the host); limits 160 + 140 s = 5 min.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage kda_verify 160 cake verify --device cuda --timeout 150 --dtypes bf16 --seeds 0 1 \
  --schedule experiments/kda/kda_fused_chunkpar.cake --json $RES/verify_kda_chunkpar.json
# Times the schedule only when the verdict above passed (else fla alone, and the log says why).
stage kda_bench 140 python3 scripts/gpu_kda_bench.py --json $RES/kda_bench_chunkpar.json \
  --schedule experiments/kda/kda_fused_chunkpar.cake --seed-verdict $RES/verify_kda_chunkpar.json
cat $RES/stages.txt
