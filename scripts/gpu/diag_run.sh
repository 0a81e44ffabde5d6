# A short diagnostic H200 session (2026-11-30, session 2): host overhead of the CUDA path, where the
# verifier's time goes on each lowered schedule (gate by gate), and kmeans_update at every shape.
source scripts/gpu/lib.sh
stage host_overhead 50 python3 scripts/gpu_host_overhead.py --out $RES
stage vt_pingpong 70 python3 scripts/gpu_verify_timing.py --out $RES/vt_pingpong --dtypes bfloat16 --schedule experiments/kmeans/assign_pingpong.cake:cuda:sm_90a
stage vt_plain_cuda 60 python3 scripts/gpu_verify_timing.py --out $RES/vt_plain_cuda --dtypes bfloat16 --schedule experiments/kmeans/assign_plain.cake:cuda:sm_90a
stage vt_plain_triton 150 python3 scripts/gpu_verify_timing.py --out $RES/vt_plain_triton --schedule experiments/kmeans/assign_plain.cake:triton
stage vt_update_triton 110 python3 scripts/gpu_verify_timing.py --out $RES/vt_update_triton --schedule experiments/kmeans/update_atomic.cake:triton
stage bench_update 110 python3 scripts/gpu_bench_shapes.py --out $RES --ops kmeans_update --no-lloyd --max-seconds 2
cat $RES/stages.txt
