// cake_tma.cuh -- Hopper bulk tensor copies (TMA): global -> shared through a CUtensorMap, completing as
// transaction bytes on an mbarrier. Coordinates are element indices, innermost dimension first; boxes that
// reach past the tensor's bounds are zero-filled (and still count their full bytes).
#pragma once
#include "cake_common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
CAKE_DEVICE void cake_tma_prefetch_desc(const CakeTensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

CAKE_DEVICE void cake_tma_load_1d(void* smem_dst, const CakeTensorMap* map, uint64_t* bar, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];\n"
      :: "r"(cake_smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(cake_smem_addr(bar)), "r"(c0)
      : "memory");
}

CAKE_DEVICE void cake_tma_load_2d(void* smem_dst, const CakeTensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      :: "r"(cake_smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(cake_smem_addr(bar)),
         "r"(c0), "r"(c1)
      : "memory");
}

CAKE_DEVICE void cake_tma_load_3d(void* smem_dst, const CakeTensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n"
      :: "r"(cake_smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(cake_smem_addr(bar)),
         "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Multicast: the box lands at the same shared-memory offset in every CTA of the cluster named in `ctas` (bit i:
// cluster rank i), and completes its bytes on the mbarrier at `bar`'s offset in each of them.
CAKE_DEVICE void cake_tma_load_1d_multicast(void* smem_dst, const CakeTensorMap* map, uint64_t* bar, uint16_t ctas,
                                            int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4}], [%2], %3;\n"
      :: "r"(cake_smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(cake_smem_addr(bar)), "h"(ctas),
         "r"(c0)
      : "memory");
}

CAKE_DEVICE void cake_tma_load_2d_multicast(void* smem_dst, const CakeTensorMap* map, uint64_t* bar, uint16_t ctas,
                                            int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5}], [%2], %3;\n"
      :: "r"(cake_smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(cake_smem_addr(bar)), "h"(ctas),
         "r"(c0), "r"(c1)
      : "memory");
}

CAKE_DEVICE void cake_tma_load_3d_multicast(void* smem_dst, const CakeTensorMap* map, uint64_t* bar, uint16_t ctas,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5, %6}], [%2], %3;\n"
      :: "r"(cake_smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(cake_smem_addr(bar)), "h"(ctas),
         "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Orders this thread's prior generic-proxy shared-memory writes before later async-proxy accesses
// (TMA stores, wgmma/tcgen05 operand reads) -- needed after ordinary stores that the tensor cores read.
CAKE_DEVICE void cake_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif
