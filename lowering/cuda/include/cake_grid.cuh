// cake_grid.cuh -- the grid-wide barrier of a fused launch (`fuse A into B`): every CTA of a cooperative launch
// meets here after running A's blocks, so B's reads see all of A's writes, as they did across the launch boundary.
#pragma once
#include <cooperative_groups.h>
#include "cake_common.cuh"

CAKE_DEVICE void cake_grid_sync() {
  // Cooperative groups' grid barrier orders generic-proxy memory at gpu scope. B may read A's results through
  // TMA, which is the async proxy: a proxy fence on each side orders the writes before the barrier and the
  // bulk copies after it (PTX ISA, "fence.proxy.async").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
  cooperative_groups::this_grid().sync();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}
