# H200 session 4 (issue 15 item 2): host time per call of the exported CUDA assign on the C++ launcher and on the
# ctypes path, the exported Triton assign beside them, CUDA-graph capture + replay on each, and `cake certify`
# through the launcher. Expected ~2.5 minutes (export ~20 s, launcher build ~20 s, three host runs ~15 s each,
# certify bf16 ~60 s); the limits below are ceilings.
# Look for: $RES/summary.log (the table: torch_ops us per path; goal <= 10 us), host_cuda_cpp.json "launcher_stats"
# (launched > 0: the C++ kernel ran), every "graph" true, certify rc=0 with "host_path": {"kind": "cpp", ...}.
source scripts/gpu/lib.sh
EXP=/tmp/s4_cuda
TRI=/tmp/s4_triton
rm -rf $EXP $TRI
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
stage host_triton 60 python3 scripts/gpu_host_overhead.py --package $TRI --label triton --out $RES
stage summary 15 python3 scripts/gpu_host_overhead.py --summarize $RES/host_cuda_cpp.json \
  $RES/host_cuda_ctypes.json $RES/host_triton.json --out $RES
stage certify 120 env CAKE_EXPORT_HOST_PATH=cpp cake certify $EXP --device cuda --dtypes bf16
cp $EXP/cake_s4_cuda/certificate.json $RES/certificate_s4_cuda.json
pack
cat $RES/stages.txt
