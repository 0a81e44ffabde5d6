// cake_warpgroup.cuh -- named barriers (any target) and per-warpgroup register reallocation (sm_90a+).
#pragma once
#include "cake_common.cuh"

// Named barriers 1..15 among `threads` threads (a multiple of 32); id 0 is __syncthreads'.
CAKE_DEVICE void cake_named_bar_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
CAKE_DEVICE void cake_named_bar_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}

#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM100_ALL) || \
                               defined(__CUDA_ARCH_SPECIFIC__) || defined(__CUDA_ARCH_FAMILY_SPECIFIC__))
// setmaxnreg takes effect only when the kernel has a register cap at entry (__launch_bounds__(T, 1)) and
// every warp of the warpgroup executes it; the count is an immediate multiple of 8 in 24..256.
template <int N>
CAKE_DEVICE void cake_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N)); }
template <int N>
CAKE_DEVICE void cake_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N)); }
#endif
