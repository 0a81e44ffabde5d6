# H200 session 4, call 3 (issues 15, 18, 17): the exported op's host path (C++ launcher vs ctypes vs Triton,
# graph replay, certify through the C++ path), the counting-sort update's per-launch times and param moves,
# the Lloyd iteration against batch_kmeans_Euclid, and the lowered Triton assign against the hand-written one.
# Stages as in s4_launcher.sh, s4_update.sh, s4_lloyd.sh and s4_triton_emit.sh.
source scripts/gpu/lib.sh
EXP=/tmp/s4_cuda; TRI=/tmp/s4_triton; rm -rf $EXP $TRI
export CAKE_EXPORT_CACHE=/tmp/s4_launcher_cache
stage export_cuda 60 cake export experiments/kmeans/assign_pingpong.cake --backend cuda --arch sm_90a \
  --static D=128 --name cake_s4_cuda -o $EXP
stage export_triton 30 cake export experiments/kmeans/assign_plain.cake --name cake_s4_triton -o $TRI
stage build_launcher 90 python3 -c "import time; t = time.time(); from cake.export.runtime import _launcher; \
print(_launcher.build(), f'{time.time() - t:.1f} s')"
stage host_cuda_cpp 60 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package $EXP \
  --label cuda_cpp --out $RES
stage host_cuda_ctypes 60 env CAKE_EXPORT_HOST_PATH=ctypes python3 scripts/gpu_host_overhead.py --package $EXP \
  --label cuda_ctypes --out $RES
stage host_triton 50 python3 scripts/gpu_host_overhead.py --package $TRI --label triton --out $RES
stage host_summary 15 python3 scripts/gpu_host_overhead.py --summarize $RES/host_cuda_cpp.json \
  $RES/host_cuda_ctypes.json $RES/host_triton.json --out $RES
stage update_sweep 70 python3 scripts/gpu_update_sorted.py --out $RES/update_sorted --shape fk_fp16 --max-seconds 3
stage lloyd_pipeline_bench 200 python3 scripts/gpu_lloyd_bench.py --out $RES/lloyd --shapes cake_cell fk_fp16 --processes 3
stage triton_vs_hand 150 python3 scripts/gpu_triton_vs_hand.py --out "$RES/triton_vs_hand" --processes 3 \
  --config 128,128,4,2 --shape cake_cell --graphs --warmup-timeout 55 --process-timeout 40
stage certify 100 env CAKE_EXPORT_HOST_PATH=cpp cake certify $EXP --device cuda --dtypes bf16
cp $EXP/cake_s4_cuda/certificate.json $RES/certificate_s4_cuda.json 2>/dev/null; pack
cat $RES/stages.txt
