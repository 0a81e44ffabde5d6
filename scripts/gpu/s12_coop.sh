# H200 session 12, branch coop: cooperative launches (for `fuse A into B`'s grid-wide barrier). About 3 minutes,
# one 420 s budget; no carried wheels needed beyond setup.sh's.
# 1. coop_probe (~30 s: an nvcc compile, then milliseconds of GPU work): a grid.sync() kernel launched through
#    cuLaunchCooperativeKernel and through cuLaunchKernelEx + CU_LAUNCH_ATTRIBUTE_COOPERATIVE (CAKE's
#    launch.CudaModule with LaunchCode.cooperative=True), each eager, in a torch.cuda.CUDAGraph (replay, then
#    replay after the input changed), under the driver's stream capture (the captured node's cooperative attribute
#    read back) and with one block more than fits (must be refused: COOPERATIVE_LAUNCH_TOO_LARGE).
#    Look for, in coop/probe.json: for the CudaModule form eager_sum 1048576.0, torch_graph ok true,
#    driver_capture node_cooperative 1, one_block_too_many "refused: COOPERATIVE_LAUNCH_TOO_LARGE". The
#    cuLaunchCooperativeKernel row answers whether that entry point is capturable too (we ship the Ex form either way).
# 2. coop_export + coop_build_launcher (~25 s): the ping-pong assign exported at D=128, the C++ launcher built.
# 3. coop_{ctypes,cpp}_{plain,assign} (~15 s each): the exported op on each host path, plain and with the assign
#    launch's code marked cooperative (as the lead marks a fused kernel's). Look for, in coop/coop_export_*.json:
#    ids_equal_cake all true, graph replay_equals_eager and after_inputs_change true, cooperative_calls_ctypes > 0
#    for ctypes_assign, launch_flags [false, true] for the *_assign rows, launcher_stats launched > 0 for cpp rows,
#    and host_us median of *_assign within a microsecond or two of *_plain (cuLaunchKernelEx's config is built once).
source scripts/gpu/lib.sh
budget 420
PKG=/tmp/s12_coop_export
rm -rf $PKG; mkdir -p $RES/coop
export CAKE_EXPORT_CACHE=/tmp/s12_coop_launcher
budgeted coop_probe 90 40 python3 scripts/gpu_coop_launch.py probe --out $RES/coop
budgeted coop_export 60 30 cake export experiments/kmeans/assign_pingpong.cake --backend cuda --arch sm_90a \
  --static D=128 --name cake_s12_coop -o $PKG
budgeted coop_build_launcher 60 30 python3 -c "from cake.export.runtime import _launcher; print(_launcher.build())"
for path in ctypes cpp; do
  budgeted coop_${path}_plain 60 25 env CAKE_EXPORT_HOST_PATH=$path python3 scripts/gpu_coop_launch.py export \
    --package $PKG --out $RES/coop --label ${path}_plain
  budgeted coop_${path}_assign 60 25 env CAKE_EXPORT_HOST_PATH=$path python3 scripts/gpu_coop_launch.py export \
    --package $PKG --out $RES/coop --label ${path}_assign --cooperative assign
done
