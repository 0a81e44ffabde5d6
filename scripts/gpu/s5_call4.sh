# H200 session 5, call 4 (issues 14, 15, 18): the KDA chunk-parallel schedule with tf32x3 state products (bf16
# gates under seeds 0 1, then timed at the six shapes; scripts/gpu/s5_kda5.sh), the exported op's host time
# without dead memsets (scripts/gpu/s5_host5.sh, stage limits widened), and update_ranked's fp16 gates (cut at
# 40 s in call 3). One setup for all stages.
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
SCHED=experiments/kda/kda_fused_chunkpar.cake
stage kda5_verify 120 cake verify --device cuda --timeout 110 --dtypes bf16 --seeds 0 1 --schedule $SCHED \
  --json $RES/verify_kda5.json
stage kda5_bench 110 python3 scripts/gpu_kda_bench.py --json $RES/kda5_bench.json --schedule $SCHED \
  --seed-verdict $RES/verify_kda5.json --max-seconds 15
EXP=/tmp/s5_host5; ONE=/tmp/s5_host5_one; rm -rf $EXP $ONE; mkdir -p $RES/host5
export CAKE_EXPORT_CACHE=/tmp/s5_host5_launcher
stage host5_export 20 cake export experiments/kmeans/assign_pingpong.cake --backend cuda --arch sm_90a \
  --static D=128 --name cake_s5_host5 -o $EXP
stage host5_export_one 15 cake export experiments/kmeans/assign_cp_async.cake --backend cuda --arch sm_90 \
  --static D=128 --name cake_s5_host5_one -o $ONE
stage host5_build_launcher 35 python3 -c "import time; t = time.time(); from cake.export.runtime import _launcher; \
print(_launcher.build(), f'{time.time() - t:.1f} s')"
stage host5_cpp 25 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package $EXP \
  --label cpp --out $RES/host5
stage host5_cpp_fills 25 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package $EXP \
  --label cpp_fills --keep-fills --out $RES/host5
stage host5_one_launch 15 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package $ONE \
  --label one_launch --out $RES/host5
stage host5_summary 6 python3 scripts/gpu_host_overhead.py --summarize $RES/host5/host_cpp.json \
  $RES/host5/host_cpp_fills.json --out $RES/host5
stage host5_certify 45 env CAKE_EXPORT_HOST_PATH=cpp cake certify $EXP --device cuda --dtypes bf16
cp $EXP/cake_s5_host5/certificate.json $RES/host5/certificate.json; pack
stage upd5_verify_f16 60 env CAKE_BACKEND=triton python3 -m cake verify --schedule experiments/kmeans/update_ranked.cake \
  --device cuda --all-gates --timeout 55 --seeds 0 1 --dtypes fp16 --json $RES/upd5_verify_f16.json
cat $RES/stages.txt
