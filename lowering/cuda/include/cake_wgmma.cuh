// cake_wgmma.cuh -- Hopper warpgroup MMA (sm_90a): shared-memory matrix descriptors, wgmma.mma_async
// m64nNk16 with bf16/f16 operands and fp32 accumulators, and the fence / commit / wait protocol.
//
// Accumulator fragment of m64nNk16 (per warpgroup; warp w = warp index within the warpgroup, g = lane/4,
// t = lane%4): register i holds row 16*w + g + 8*((i/2)%2), column 8*(i/4) + 2*t + (i%2).
//
// The wgmma.mma_async wrappers themselves (one per form and operand type) are generated from cake.arch's
// mma table by cake.lowering.cuda.mma_wrappers.
#pragma once
#include "cake_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Descriptor of a K-major operand tile in shared memory (PTX "matrix descriptor"):
//   bits  0-13 start address >> 4;  16-29 leading-dimension byte offset >> 4 (unused for swizzled K-major);
//   bits 32-45 stride-dimension byte offset >> 4 (8 rows x swizzle width: the distance between 8-row groups);
//   bits 49-51 base offset (0: buffers start on a swizzle-pattern boundary);  62-63 swizzle:
//   0 none, 1 = 128B, 2 = 64B, 3 = 32B.
CAKE_DEVICE uint64_t cake_wgmma_desc(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes, uint32_t swizzle_code) {
  const uint64_t addr = cake_smem_addr(smem);
  return ((addr & 0x3FFFFull) >> 4) | (static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFFu) << 32) | (static_cast<uint64_t>(swizzle_code & 3u) << 62);
}

// Orders this warpgroup's prior register accesses of the accumulators before the async MMA reads them.
CAKE_DEVICE void cake_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
CAKE_DEVICE void cake_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are pending.
template <int N>
CAKE_DEVICE void cake_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }
// Keeps the compiler from moving accumulator reads/writes across the async MMA's lifetime.
CAKE_DEVICE void cake_wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r) :: "memory"); }
#endif
