# H200 session 7, issue 18 (branch upd7): the update's host path. 230 s of stage limits (90 + 30 + 110), ~170 s
# expected. Run from the repository root with carry [".whl"]. Every step's CPU path was rehearsed on the CPU
# (gpu_update_gates --device cpu, gpu_update_host --dry-run, gpu_update_bench --dry-run).
# Why: session 7 call 1 timed the same kernels at k128 in 0.271 ms (gpu_update_sorted) and 0.615 ms
# (gpu_update_bench). Both scripts call the same callable; what differs is how often our call starts with the GPU
# idle: torch_index_add's bincount synchronizes the host, so in the bench (3 contestants, shuffled) the contestant
# after it runs on an empty queue, and our call then measures the host issuing 6 launches + 5 allocations
# (0.36-0.57 ms in the sweep's own idle-start reps, 0.54-0.78 in the bench's) instead of its kernels (0.23-0.32).
# Branch upd7 makes repeated calls replay a per-signature call plan straight through the compiled kernels
# (lowering/triton/module.py, "Call plans") and caches the launcher's shape refusal per call signature.
# a. upd7_gates (<= 90 s; call 1's took 57 s): the op's table (experiments/kmeans/update_buckets.json, now with
#    the large-cluster bucket at BD=32 RWARPS=1 as call 1 chose and gated it) through every kmeans_update gate in
#    bf16, fp16, fp32 under seeds 0 and 1, six workers at once — now through call plans (ORD-02's five runs, the
#    poisoned outputs and every repeated signature replay the plan). Look for "kmeans_update: PASSED".
# b. upd7_host (<= 30 s): scripts/gpu_update_host.py at large_n, cake_cell, k128: per call, host µs (issuing it),
#    idle ms (sync, call, sync) and gpu ms (kernels alone, the GPU held busy), plans off vs on, flash-kmeans beside.
#    Look for: "plans on/off same bits: True" and "direct launches: True" on every shape; host us with plans on
#    well under off (the CPU proxy, scripts/bench_triton_host_cpu.py: 342 -> 54 Python calls a call); idle ms
#    with plans on at or below flash-kmeans' idle ms. If direct launches is False, Triton's JIT did not return a
#    CompiledKernel on this Triton (the replay then still skips the checks but not the JIT's binder).
# c. upd7_bench (<= 110 s; call 1's took 95 s): the five shapes, 3 processes, interleaved with flash-kmeans and
#    torch index_add, cold L2 (scripts/gpu_update_bench.py, the settings of call 1). Look at "vs flash-kmeans
#    [95%]": issue 18's goal is every interval above 1.0 (call 1: 1.253, 1.779, 1.027 [0.932, 1.150], 1.117,
#    0.998 [0.906, 1.085]). process_*.json has every rep: ours after torch_index_add should no longer be the slow
#    half of the reps.
source scripts/gpu/lib.sh
TABLE=experiments/kmeans/update_buckets.json
stage upd7_gates 90 python3 scripts/gpu_update_gates.py --table $TABLE --jobs 6 --timeout 80 \
  --out $RES/upd7_gates.json
stage upd7_host 30 python3 scripts/gpu_update_host.py --out $RES/upd7_host.json --table $TABLE \
  --shapes large_n cake_cell k128 --calls 200
stage upd7_bench 110 python3 scripts/gpu_update_bench.py --out $RES/upd7_bench --table $TABLE --processes 3 \
  --reps 15 --max-seconds 1 --warmup-timeout 30 --process-timeout 30 --gate-timeout 60
cat $RES/stages.txt
