// cake_tcgen05.cuh -- Blackwell 5th-generation tensor cores (sm_100a): tensor-memory (TMEM) allocation,
// tcgen05.mma with shared-memory operand descriptors and a TMEM accumulator, completion through
// tcgen05.commit onto an mbarrier, and TMEM -> register loads.
//
// TMEM is 128 lanes x 512 columns of 32-bit cells per SM. An address is (lane << 16) | column. A warp may
// only touch the 32 lanes of its quarter: warp w % 4 owns lanes 32*(w%4) .. 32*(w%4)+31. For an M=128
// cta_group::1 MMA, accumulator row i lives in lane i and column j in column base + j.
#pragma once
#include "cake_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM100_ALL)
// Allocation is warp-collective; the allocated base address is written to `*slot` in shared memory.
// `columns` is a power of two >= 32.
CAKE_DEVICE void cake_tmem_alloc(uint32_t* slot, uint32_t columns) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n"
               :: "r"(cake_smem_addr(slot)), "r"(columns) : "memory");
}
CAKE_DEVICE void cake_tmem_relinquish() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
}
CAKE_DEVICE void cake_tmem_dealloc(uint32_t taddr, uint32_t columns) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" :: "r"(taddr), "r"(columns) : "memory");
}

// Thread-sync fences that order tcgen05 operations across a barrier (before: the issuing side; after: the
// side that proceeds past the barrier).
CAKE_DEVICE void cake_tcgen05_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory"); }
CAKE_DEVICE void cake_tcgen05_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory"); }

// Shared-memory descriptor for tcgen05 (differs from wgmma's: version field bits 46-47 = 1, layout type in
// bits 61-63 with 0 none, 2 = 128B, 4 = 64B, 6 = 32B swizzle). K-major swizzled operands ignore the
// leading byte offset; the stride byte offset is the distance between 8-row groups.
CAKE_DEVICE uint64_t cake_umma_desc(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes, uint32_t layout_code) {
  const uint64_t addr = cake_smem_addr(smem);
  return ((addr & 0x3FFFFull) >> 4) | (static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFFu) << 32) | (1ull << 46) |
         (static_cast<uint64_t>(layout_code & 7u) << 61);
}

// The tcgen05.mma wrappers (one per form and operand type, instruction descriptor included) are generated
// from cake.arch's mma table by cake.lowering.cuda.mma_wrappers.

// Arrives once on `bar` when every tcgen05.mma this thread issued before it has completed.
CAKE_DEVICE void cake_umma_commit(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n"
               :: "r"(cake_smem_addr(bar)) : "memory");
}

// 32 consecutive columns of this thread's lane (32x32b shape, x32): r[j] = TMEM[lane][col + j].
CAKE_DEVICE void cake_tmem_load_32(float* r, uint32_t taddr) {
  uint32_t v[32];
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];\n"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]),
        "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15]),
        "=r"(v[16]), "=r"(v[17]), "=r"(v[18]), "=r"(v[19]), "=r"(v[20]), "=r"(v[21]), "=r"(v[22]), "=r"(v[23]),
        "=r"(v[24]), "=r"(v[25]), "=r"(v[26]), "=r"(v[27]), "=r"(v[28]), "=r"(v[29]), "=r"(v[30]), "=r"(v[31])
      : "r"(taddr));
#pragma unroll
  for (int j = 0; j < 32; ++j) r[j] = __uint_as_float(v[j]);
}
// 16 consecutive columns (x16): the tail of a row whose width is an odd multiple of 16 (tcgen05 N = 16, 48, ...).
CAKE_DEVICE void cake_tmem_load_16(float* r, uint32_t taddr) {
  uint32_t v[16];
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15}, [%16];\n"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]),
        "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15])
      : "r"(taddr));
#pragma unroll
  for (int j = 0; j < 16; ++j) r[j] = __uint_as_float(v[j]);
}
// Zeroes 32 consecutive columns of this thread's lane (tensor memory holds garbage after allocation).
CAKE_DEVICE void cake_tmem_store_zero_32(uint32_t taddr) {
  const uint32_t z = 0u;
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], {%1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, "
      "%1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1, %1};\n"
      :: "r"(taddr), "r"(z) : "memory");
}
CAKE_DEVICE void cake_tmem_store_wait() { asm volatile("tcgen05.wait::st.sync.aligned;\n" ::: "memory"); }

// Waits for this thread's outstanding tcgen05.ld results.
CAKE_DEVICE void cake_tmem_load_wait() { asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory"); }
#endif
