# H200, written in session 13 and not yet run: what session 13 ran out of device time for, on the committed
# experiments/kda/kda_fused_staged.cake (one-TF32 intra at 2 warps; passed every bf16 gate under seeds 0-2 there).
# Carry [".whl"]. Two calls; each re-gates the schedule first, so neither depends on the other's machine:
#   bash scripts/gpu/s13_kda3.sh h96    (<= 560 s)
#   bash scripts/gpu/s13_kda3.sh h64    (<= 560 s)
#   1. verify_bf16 (<= 150 s): every kda_forward gate in bf16 under seeds 0, 1, 2 (the bench times only a pass).
#   2. bench (<= 280 s): gpu_kda_bench.py against fla chunk_kda (fused flags, FLA_FLASH_KDA=0), interleaved, cold
#      L2, at the three shapes of that H (fla autotunes each on its first call: 50-100 s). Session 13 timed four of
#      the six: h96_fixed 0.875x, h64_fixed 0.791x, h96_varlen_mixed 0.719x, h64_varlen_mixed 0.622x (varlen runs one
#      launch pair a sequence from the host: compare with the fixed shape of the same H).
#   3. verify_fp16 (what is left, <= 120 s): the gates in fp16 under seeds 0 and 1 (no GPU fp16 verdict yet).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0 TRITON_CACHE_AUTOTUNING=1
SCHED=experiments/kda/kda_fused_staged.cake
case "${1:?h96 or h64}" in
h96) SHAPES="h96_fixed h96_varlen_mixed h96_varlen_1024x8" ;;
h64) SHAPES="h64_fixed h64_varlen_mixed h64_varlen_1024x8" ;;
*) echo "h96 or h64" >&2; exit 2 ;;
esac
budget 560
budgeted verify_bf16_$1 150 60 cake verify --device cuda --timeout 90 --dtypes bf16 --seeds 0 1 2 --schedule $SCHED \
  --json $RES/verify_bf16_$1.json
# shellcheck disable=SC2086
budgeted bench_$1 280 100 python3 scripts/gpu_kda_bench.py --json $RES/bench_$1.json --schedule $SCHED \
  --seed-verdict $RES/verify_bf16_$1.json --shapes $SHAPES --max-seconds 110
budgeted verify_fp16_$1 120 60 cake verify --device cuda --timeout 90 --dtypes fp16 --seeds 0 1 --schedule $SCHED \
  --json $RES/verify_fp16_$1.json
pack
cat $RES/stages.txt
