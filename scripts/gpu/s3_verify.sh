# H200, issue 16 items 3-5 (verification before timing, battery time, the verifier's self-test), ~5 minutes of
# GPU time: run from the repository root with carry [".whl"]. Every stage is bounded; results land in $RES
# (packed into $OUT/results.tgz after each stage).
# 1. calibrate: GPU tolerance tables from GPU controls (torch for every op; the compiled Triton control too for
#    kmeans_assign) -> experiments/{starter,kmeans}/tolerances_cuda.json, copied to $RES (commit them).
# 2. battery_time: the GPU battery per kernel, a cold pass (compile + check) and a warm pass (check only), so
#    compilation and checking are printed apart ($RES/battery_time/verify_timing.json).
# 3. seeds_*: `cake verify --seeds 0 1 2` (one worker, one compile) of the ping-pong (CUDA backend) and the
#    plain assign (Triton) in bf16 and fp16, every gate: the persistent-grid case (CMP-01), ORD-01/PRC-02 at
#    D=128, EXC-01's corners, under three seeds.
# 4. selftest: `cake verify --self-test` on the GPU for kmeans_assign (torch control, fp16): the mutation
#    operators through the GPU battery, SIDE-STREAM (the unsynchronized side stream) included.
source scripts/gpu/lib.sh
stage calibrate 55 sh -c 'python3 -m cake.verifier.calibrate --device cuda --no-triton &&
  python3 -m cake.verifier.calibrate --device cuda --op kmeans_assign &&
  cp experiments/starter/tolerances_cuda.json $RES/starter_tolerances_cuda.json &&
  cp experiments/kmeans/tolerances_cuda.json $RES/kmeans_tolerances_cuda.json'
stage battery_time 70 python3 scripts/gpu_verify_timing.py --out $RES/battery_time --dtypes bfloat16 \
  --schedule experiments/kmeans/assign_pingpong.cake:cuda:sm_90a --schedule experiments/kmeans/assign_plain.cake:triton
V="cake verify --device cuda --all-gates --no-cache --timeout 60 --dtypes bf16 fp16 --seeds 0 1 2"
stage seeds_pingpong 50 env CAKE_BACKEND=cuda $V --schedule experiments/kmeans/assign_pingpong.cake --json $RES/seeds_pingpong.json
stage seeds_plain 70 $V --schedule experiments/kmeans/assign_plain.cake --json $RES/seeds_plain.json
stage selftest 50 cake verify --self-test --device cuda --op kmeans_assign --controls torch --dtypes fp16 \
  --report $RES/selftest_cuda.md
cat $RES/stages.txt
