// cake_sm80.cuh -- Ampere-class warp-level helpers (valid on sm_80 and later): cp.async with zero fill and
// commit/wait groups and ldmatrix.
#pragma once
#include "cake_common.cuh"

// 16-byte global->shared copy; when `valid` is false the destination is zero-filled and nothing is read.
CAKE_DEVICE void cake_cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
  const uint32_t src_bytes = valid ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(cake_smem_addr(smem_dst)), "l"(gmem_src), "r"(src_bytes) : "memory");
}
// 16-byte destination chunk filled from the first `nbytes` (0..16) source bytes, the rest zeroed.
CAKE_DEVICE void cake_cp_async_16_n(void* smem_dst, const void* gmem_src, int nbytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(cake_smem_addr(smem_dst)), "l"(gmem_src), "r"(nbytes) : "memory");
}
// 4-byte variant for rows that are not 16-byte aligned.
CAKE_DEVICE void cake_cp_async_4(void* smem_dst, const void* gmem_src, bool valid) {
  const uint32_t src_bytes = valid ? 4u : 0u;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
               :: "r"(cake_smem_addr(smem_dst)), "l"(gmem_src), "r"(src_bytes) : "memory");
}
CAKE_DEVICE void cake_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
CAKE_DEVICE void cake_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }
// Makes the mbarrier track completion of this thread's prior cp.async operations (one arrival each,
// counted against the barrier's expected arrivals: `.noinc`).
CAKE_DEVICE void cake_cp_async_mbarrier_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(cake_smem_addr(bar)) : "memory");
}

// Four 8x8 b16 matrices from shared memory; lane i supplies the row address of matrix i/8, row i%8.
CAKE_DEVICE void cake_ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cake_smem_addr(smem_row)));
}
// The same four matrices, each transposed on the way (lane i's registers hold column pairs): the B fragment
// of mma.sync from a [K, N] tile whose N is contiguous.
CAKE_DEVICE void cake_ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cake_smem_addr(smem_row)));
}
CAKE_DEVICE void cake_ldmatrix_x2(uint32_t (&r)[2], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(cake_smem_addr(smem_row)));
}

// The mma.sync wrappers (one per form and operand type) are generated from cake.arch's mma table by
// cake.lowering.cuda.mma_wrappers. Fragment layout of m16n8k16 (g = lane/4, t = lane%4):
//   c0,c1 -> row g,   cols 2t, 2t+1;   c2,c3 -> row g+8, cols 2t, 2t+1.
