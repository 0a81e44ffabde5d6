# H200 session 8 (issue 15, branch tout8): an exported TRITON package's out-variants, now that the generated launcher
# takes the caller's outputs and workspace (`out=`, `workspace=`: no allocation and no copy a call). One package of
# assign_plain_norms (kmeans_assign: ||c||^2 scratch) and update_atomic (kmeans_update: zero-filled sums and counts),
# then scripts/gpu_triton_out.py at B=1 N=256 K=128 D=128 bf16: the out-variants equal the functional ops (record
# and replay) at unchanged addresses; both captured in one CUDA graph and replayed (before and after the inputs
# change in place); torch.compile(fullgraph=True) through AOT autograd of a Lloyd step calling both (the triton_ops'
# bodies traced: the launcher on FunctionalTensors, its kernels as triton_kernel_wrapper nodes; on the CPU
# tests/export/trace_triton_out.py traces the same step on fake CUDA tensors, without running it); host us per call,
# functional vs out-variant.
# Expected ~35 s: export ~8 s, the check ~25 s (Triton compiles four kernels ~10 s, torch.compile ~8 s); the limits
# below sum to 57 s.
# Look for: $RES/tout8_check.log (and $RES/tout8/triton_out.json): "routes" both "function" (the Triton launcher,
# not the reference); "out_equals_functional": [true, true] and "same_addresses": true; "workspace_bytes"
# {"kmeans_assign": 512, "kmeans_update": 66048} (B*K*4 = 512; sums 1*128*128*4 = 65536, then counts at 65536: 512);
# "graph": {"replay_equals_eager": true, "after_inputs_change": true}; "compile": {"equal": true,
# "traced_kernels": true} with triton_kernel_wrapper_functional among "graph_ops" (a failure here is the launcher
# traced with FunctionalTensors: lowering/triton/host_prelude.py `_k_traceable`, `_k_signature`/`_k_real`; session
# 9's issue-15 fix made each traced launch go through wrap_triton); "host_us": the *_out
# columns beside the functional ones (no per-call torch.empty; the functional op pays one per output and scratch
# buffer).
source scripts/gpu/lib.sh
EXP=/tmp/s8_tout8
rm -rf $EXP
mkdir -p $RES/tout8
stage tout8_export 12 cake export experiments/kmeans/assign_plain_norms.cake experiments/kmeans/update_atomic.cake \
  --name cake_s8_tout8 -o $EXP
stage tout8_check 45 python3 scripts/gpu_triton_out.py --package $EXP --out $RES/tout8
pack
cat $RES/stages.txt
